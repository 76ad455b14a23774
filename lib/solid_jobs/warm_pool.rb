# frozen_string_literal: true

require "zlib"

module SolidJobs
  # The warm pool: tasks that hold non-shareable state (a Mutex, a Thread, a
  # connection pool in a class-level instance variable) in a Rails app run in
  # a persistent warm process (`solid-jobs warm ID`) instead of a Ractor.
  #
  # At enqueue, such a job becomes a SolidJobsGenericExecutor job on the
  # task's channel, whose arguments are the task name and its arguments as
  # plain JSON. A worker runs that job on a thread worker: one JSON line over
  # a Unix socket to warm worker `crc32(task name) % SOLID_JOBS_WARM_WORKERS`,
  # one JSON line back. See docs/rails.md, "Warm pool".
  module WarmPool
    EXECUTOR = "SolidJobsGenericExecutor"
    SOCKET_NAME = "solid_jobs_rails_%d.sock"
    DEFAULT_WORKERS = 1
    # Seconds a round trip may take, the task's own work included.
    DEFAULT_TIMEOUT = 30.0

    class << self
      # true or false replaces the `defined?(Rails)` condition of the rule
      # (tests, and apps that want the warm pool without Rails); nil restores
      # it. A plain value, so worker Ractors can read it.
      attr_accessor :assume_rails

      def rails?
        assume_rails.nil? ? !defined?(::Rails).nil? : assume_rails
      end

      def workers = Integer(ENV.fetch("SOLID_JOBS_WARM_WORKERS", DEFAULT_WORKERS)).clamp(1, 1024)
      def timeout = Float(ENV.fetch("SOLID_JOBS_WARM_TIMEOUT", DEFAULT_TIMEOUT))
      def socket_dir = ENV.fetch("SOLID_JOBS_WARM_SOCKET_DIR", "/tmp")
      def socket_path(worker_id) = File.join(socket_dir, format(SOCKET_NAME, worker_id))
      def worker_for(task_name) = Zlib.crc32(task_name.to_s) % workers

      # The rule: true only when Rails is present, at least one argument is
      # not Ractor-shareable, and the task class (or a superclass) holds in a
      # class-level instance variable a Mutex, Thread, Fiber, or an object
      # whose class name contains "Pool".
      def requires_warm_pool?(task_class, arguments, rails: rails?)
        return false unless rails
        return false if arguments.all? { |argument| Ractor.shareable?(argument) }

        holds_thread_state?(task_class)
      end

      def holds_thread_state?(task_class)
        # Through Reflection: the classes and the values they hold are the
        # app's, and may redefine any of these methods (or be BasicObjects).
        klass = task_class
        while Class === klass && !Object.equal?(klass)
          held = Reflection.instance_variables(klass).any? { |ivar| thread_state?(Reflection.instance_variable_get(klass, ivar)) }
          return true if held

          klass = Reflection.superclass(klass)
        end
        false
      rescue Ractor::IsolationError
        true # a non-main Ractor may not even read it: it is not shareable state
      end

      def thread_state?(value)
        Thread::Mutex === value || Thread === value || Fiber === value || Reflection.class_name(value).include?("Pool")
      end

      # Task.enqueue and friends come here: argument lists that need the
      # warm pool become executor jobs, the rest are published as they are.
      # Every list is checked before anything is written.
      # `channel:`/`priority:` (Task.set) replace the task's own.
      def publish(task_class, argument_lists, due_ms: nil, channel: nil, priority: nil)
        task_name = Reflection.name(task_class)
        direct = Testing.active? || task_name == EXECUTOR || !rails?
        warm = direct ? [] : argument_lists.map { |arguments| requires_warm_pool?(task_class, arguments, rails: true) }
        unless warm.any?
          return Publisher.publish(task_class, argument_lists, due_ms: due_ms, channel: channel, priority: priority)
        end

        if task_class.solid_jobs_options[:unique]
          # The warm pool's executor jobs carry no lock: refused rather than
          # enqueued twice.
          raise Backends::NotSupported, "#{task_name} is unique, and these arguments would send it through the warm " \
                                        "pool, which does not take unique locks yet (docs/unique.md)"
        end
        if task_class.solid_jobs_options[:concurrency] || task_class.solid_jobs_options[:rate]
          # The executor job's envelope names the executor task, not this
          # one: refused rather than run without the limit.
          what = task_class.solid_jobs_options[:concurrency] ? "a concurrency" : "a rate"
          raise Backends::NotSupported, "#{task_name} has #{what} limit, and these arguments would send it " \
                                        "through the warm pool, which does not carry limits yet (docs/flow-control.md)"
        end
        options = task_class.solid_jobs_options
        executor_lists = argument_lists.each_with_index.filter_map do |arguments, i|
          [task_name, plain_json(task_class, arguments)] if warm[i]
        end
        plain = argument_lists.each_with_index.reject { |_, i| warm[i] }.map(&:first)
        plain_ids = plain.empty? ? [] : Publisher.publish(task_class, plain, due_ms: due_ms, channel: channel, priority: priority)
        # The executor job runs the target task: its channel and priority.
        warm_ids = Publisher.publish(Object.const_get(EXECUTOR), executor_lists,
                                     due_ms: due_ms, channel: channel || options.fetch(:channel),
                                     max_failures: options.fetch(:max_failures),
                                     priority: priority.nil? ? options.fetch(:priority, Publisher::DEFAULT_PRIORITY) : priority)
        warm.map { |routed| routed ? warm_ids.shift : plain_ids.shift }
      end

      # The arguments as plain JSON: validated like any task's (ArgumentError
      # naming the path of a value that is not JSON-native), deep-copied and
      # frozen.
      def plain_json(task_class, arguments)
        copy = Native::Client.build(Reflection.name(task_class), arguments, "default", 1, nil).fetch("arguments")
        Ractor.make_shareable(copy)
      end
    end
  end

  module Task
    module ClassMethods
      # Whether jobs with these arguments go to the warm pool (see WarmPool).
      def requires_warm_pool?(arguments, rails: WarmPool.rails?)
        WarmPool.requires_warm_pool?(self, arguments, rails: rails)
      end
    end
  end
end

require "solid_jobs/warm_pool/stats"
require "solid_jobs/warm_pool/client"
require "solid_jobs/warm_pool/generic_executor"
