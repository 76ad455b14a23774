# frozen_string_literal: true

module SolidJobs
  # Include in a class to make it a task:
  #
  #   class RecalculateAccount
  #     include SolidJobs::Task
  #     task_options channel: "critical", max_failures: 10
  #     def execute_task(account_id) = Account.find(account_id).recalculate!
  #   end
  #
  # Worker Ractors read the options, so they are stored frozen and shareable.
  module Task
    def self.included(base)
      base.extend(ClassMethods)
      register(base)
    end

    # The classes that included Task and their subclasses (registered by
    # ClassMethods#inherited), so a node finds its task classes without
    # scanning ObjectSpace and calling methods on every class there (any of
    # which may redefine them). Written and read in the main Ractor only
    # (Lanes reads it when a node starts): a class defined inside a worker
    # Ractor is not recorded.
    #
    # Held strongly, by identity. Ruby 3.1's weak references to classes
    # (Class#subclasses, which an earlier version walked) can hand back a
    # class the GC found dead but has not swept yet, and calling a method on
    # it crashed the process (a segfault in Lanes.thread_only? under the
    # suite's anonymous task classes). The cost: a class replaced by a code
    # reload (Rails development) stays registered, under its old identity.
    def self.register(base)
      return unless Ractor.current == Ractor.main

      (@registry ||= {}.compare_by_identity)[base] = true
    end

    # Every task class loaded in this process. Main Ractor only.
    def self.classes
      @registry ? @registry.keys : []
    end

    # Bumped whenever a task class defines execute_task, so the arity each
    # class caches (ClassMethods#solid_jobs_arity) is recomputed: a
    # redefinition may take other arguments, in that class or its
    # subclasses. An Integer, so worker Ractors can read it.
    @arity_generation = 0

    class << self
      attr_reader :arity_generation

      def execute_task_defined
        # Classes are defined in the main Ractor; another may not write here.
        @arity_generation += 1 if Ractor.current == Ractor.main
      end
    end

    # [min, max, generation]: how many positional arguments `klass`'s
    # execute_task takes (max nil: any number). Raises ArgumentError when
    # no job could ever run it: no public execute_task, or required
    # keywords (job arguments are a JSON array, passed positionally). Read
    # through Module's own methods, not the class's, which may override them.
    def self.arity_of(klass)
      unless Module.instance_method(:public_method_defined?).bind_call(klass, :execute_task)
        raise ArgumentError, "#{klass} has no public execute_task method: a task defines execute_task(...), " \
                             "which workers call with the job's arguments; nothing was enqueued"
      end

      parameters = Module.instance_method(:instance_method).bind_call(klass, :execute_task).parameters
      keywords = parameters.filter_map { |type, name| name if type == :keyreq }
      unless keywords.empty?
        raise ArgumentError, "#{klass}#execute_task requires keyword argument(s) #{keywords.join(", ")}, which a job cannot " \
                             "pass (its arguments are positional); take them positionally; nothing was enqueued"
      end

      min = parameters.count { |type, _| type == :req }
      max = parameters.any? { |type, _| type == :rest } ? nil : min + parameters.count { |type, _| type == :opt }
      [min, max, arity_generation].freeze
    end

    # Refuses, before anything is written, argument lists that `klass`'s
    # execute_task cannot take: a job that could only fail in the worker.
    def self.check_arguments(klass, argument_lists)
      min, max = klass.solid_jobs_arity
      i = argument_lists.index { |arguments| (n = arguments.size) < min || (max && n > max) } or return
      n = argument_lists[i].size
      takes = if max.nil? then "at least #{min}"
              elsif max == min then min.to_s
              else "#{min} to #{max}"
              end
      which = argument_lists.size > 1 ? " in argument list #{i}" : ""
      raise ArgumentError, "#{klass}#execute_task takes #{takes} argument(s), got #{n}#{which}; nothing was enqueued"
    end

    # A Ractor-shareable copy of a DSL block (self kept), made at
    # class-definition time, so a block that captures mutable state fails
    # here, with advice, instead of inside a worker.
    def self.shareable_block(name, block)
      raise ArgumentError, "#{name} needs a block" unless block

      reason = Shareable.obstacle(block, "the #{name} block")
      return RactorCompat.shareable_proc(block) unless reason

      raise ConfigurationError, "the #{name} block must be Ractor-shareable because it runs inside worker Ractors " \
                                "(#{reason}); do not capture local variables holding mutable objects, " \
                                "use frozen constants instead"
    end

    # A task with options for the jobs enqueued through it (Task.set):
    # the same enqueue methods as the task, frozen, holding no state of its
    # own beyond the options.
    class Configured
      attr_reader :task_class, :priority, :channel

      def initialize(task_class, priority: nil, channel: nil)
        unless priority.nil? || (priority.is_a?(Integer) && priority.between?(0, 9))
          raise ArgumentError, "priority must be an Integer from 0 (runs first) to 9 (runs last), got #{priority.inspect}"
        end
        unless channel.nil? || channel.to_s.match?(Configuration::CHANNEL_NAME)
          raise ArgumentError, "#{channel.inspect} is not a valid channel name"
        end

        @task_class = task_class
        @priority = priority
        @channel = channel&.to_s&.dup&.freeze
        freeze
      end

      def enqueue(*arguments)
        Task.check_arguments(task_class, [arguments])
        publish([arguments]).first
      end

      def enqueue_after(seconds, *arguments)
        unless seconds.is_a?(Numeric) && seconds.finite? && seconds >= 0
          raise ArgumentError, "enqueue_after needs a delay in seconds >= 0 (got #{seconds.inspect})"
        end

        Task.check_arguments(task_class, [arguments])
        publish([arguments], due_ms: Clock.now_ms + (seconds * 1000).round).first
      end

      def schedule_at(time, *arguments)
        epoch = Task.epoch_of(time)
        Task.check_arguments(task_class, [arguments])
        publish([arguments], due_ms: (epoch * 1000).round).first
      end

      def enqueue_many(argument_lists)
        Task.check_argument_lists(argument_lists)
        Task.check_arguments(task_class, argument_lists)
        publish(argument_lists)
      end

      private

      def publish(argument_lists, due_ms: nil)
        WarmPool.publish(task_class, argument_lists, due_ms: due_ms, channel: channel, priority: priority)
      end
    end

    # Epoch seconds of `time` (a Time, anything with to_time, or a number).
    def self.epoch_of(time)
      epoch = case time
              when Time then time.to_f
              when Numeric then time
              else time.respond_to?(:to_time) ? time.to_time.to_f : time
              end
      return epoch if epoch.is_a?(Numeric) && epoch.finite?

      raise ArgumentError, "schedule_at needs a Time or epoch seconds (got #{time.inspect})"
    end

    def self.check_argument_lists(argument_lists)
      return if argument_lists.is_a?(Array) && argument_lists.all?(Array)

      raise ArgumentError, "enqueue_many takes an Array of argument Arrays, e.g. [[1], [2]]"
    end

    module ClassMethods
      # A subclass inherits Task without `included`: registered here. A
      # class that defines its own self.inherited must call super (as Ruby
      # expects), or its subclasses are not registered.
      def inherited(subclass)
        super
        Task.register(subclass)
      end

      def task_options(**options)
        own = Configuration.validate_task_options(options)
        merged = (instance_variable_defined?(:@solid_jobs_task_options) ? @solid_jobs_task_options : {}).merge(own)
        @solid_jobs_task_options = Ractor.make_shareable(merged)
      end

      # Options in effect: configured defaults, then superclasses, then own.
      def solid_jobs_options
        parent = Reflection.superclass(self)
        inherited = ClassMethods === parent ? parent.solid_jobs_options : SolidJobs.config.default_task_options
        own = instance_variable_defined?(:@solid_jobs_task_options) ? @solid_jobs_task_options : nil
        own ? inherited.merge(own) : inherited
      end

      def solid_jobs_task? = true

      # Task.arity_of, cached on the class (in the main Ractor; another
      # Ractor may not set class state, so there it is computed each time).
      def solid_jobs_arity
        cached = @solid_jobs_arity
        return cached if cached && cached[2] == Task.arity_generation

        arity = Task.arity_of(self)
        @solid_jobs_arity = arity if Ractor.current == Ractor.main
        arity
      end

      # Decides the delay before the next attempt, per failure:
      #
      #   retry_delay do |failure_count, error, envelope|
      #     :drop if error.is_a?(InvalidCatalog)
      #   end
      #
      # Return seconds (Integer/Float), :drop (discard, no archive), :archive
      # (archive now) or nil (default policy). Runs inside worker Ractors, so
      # the block is made shareable here and may not capture mutable state.
      def retry_delay(&block)
        @solid_jobs_retry_delay = Task.shareable_block(:retry_delay, block)
      end

      # Runs once when a job is finally given up: `|envelope, error|`.
      def after_final_failure(&block)
        @solid_jobs_after_final_failure = Task.shareable_block(:after_final_failure, block)
      end

      # The block registered by `name` here or in a superclass, or nil.
      def solid_jobs_hook(name)
        ivar = :"@solid_jobs_#{name}"
        return instance_variable_get(ivar) if instance_variable_defined?(ivar)

        parent = Reflection.superclass(self)
        ClassMethods === parent ? parent.solid_jobs_hook(name) : nil
      end

      # The task with per-enqueue options (docs/flow-control.md,
      # "Priorities"): `Report.set(priority: 2).enqueue(42)`. Takes
      # `priority:` (0 first .. 9 last) and `channel:`. A class that defines
      # its own `self.set` keeps it; `SolidJobs::Task::Configured.new(Report,
      # priority: 2)` always works.
      def set(priority: nil, channel: nil)
        Configured.new(self, priority: priority, channel: channel)
      end

      # Enqueues one job; returns its id.
      def enqueue(*arguments)
        Task.check_arguments(self, [arguments])
        WarmPool.publish(self, [arguments]).first
      end

      # Enqueues one job to run after `seconds`; returns its id.
      def enqueue_after(seconds, *arguments)
        unless seconds.is_a?(Numeric) && seconds.finite? && seconds >= 0
          raise ArgumentError, "enqueue_after needs a delay in seconds >= 0 (got #{seconds.inspect})"
        end

        Task.check_arguments(self, [arguments])
        WarmPool.publish(self, [arguments], due_ms: Clock.now_ms + (seconds * 1000).round).first
      end

      # Enqueues one job to run at `time` (a Time, or epoch seconds).
      def schedule_at(time, *arguments)
        epoch = Task.epoch_of(time)
        Task.check_arguments(self, [arguments])
        WarmPool.publish(self, [arguments], due_ms: (epoch * 1000).round).first
      end

      # Enqueues many jobs in one round trip: `enqueue_many([[1], [2]])`.
      # Every argument list is validated before anything is written.
      def enqueue_many(argument_lists)
        Task.check_argument_lists(argument_lists)
        Task.check_arguments(self, argument_lists)
        WarmPool.publish(self, argument_lists)
      end

      private

      # A (re)defined execute_task may take other arguments.
      def method_added(name)
        Task.execute_task_defined if name == :execute_task
        super
      end
    end
  end
end
