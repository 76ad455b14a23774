# frozen_string_literal: true

module SolidJobs
  # Runs one task through the execution interceptors.
  module Executor
    # What execution interceptors receive. `envelope` is built on first use,
    # so jobs run without interceptors never convert it.
    class Execution
      attr_reader :task_class, :arguments, :worker_id

      def initialize(task_class, arguments, worker_id: nil, job: nil, envelope: nil)
        @task_class = task_class
        @arguments = arguments
        @worker_id = worker_id
        @job = job
        @envelope = envelope
      end

      def envelope
        @envelope ||= @job&.envelope
      end
    end

    module_function

    def execute(task_class, arguments, worker_id: nil, job: nil, envelope: nil)
      execution = Execution.new(task_class, arguments, worker_id: worker_id, job: job, envelope: envelope)
      previous = Thread.current[:solid_jobs_job]
      Thread.current[:solid_jobs_job] = job
      SolidJobs.config.execute_interceptors.invoke(execution) do
        task_class.new.execute_task(*execution.arguments)
      end
    ensure
      Thread.current[:solid_jobs_job] = previous
    end

    # The id of the job this thread is running (a worker's, not a
    # testing mode's), or nil.
    def current_job_id
      Thread.current[:solid_jobs_job]&.id
    end

    # [task class, nil, false] for the task named in an envelope, or
    # [nil, reason, unknown]: `unknown` is true when no such constant is
    # defined here, which a deploy may still change (the worker retries
    # the job for a while); a constant that is not a task, or cannot load
    # in a Ractor, is quarantined at once.
    def resolve(name)
      klass = Object.const_get(name)
      # Asked of Class and Task's module, never of the class itself (which
      # may redefine is_a? or respond_to?).
      return [klass, nil, false] if Class === klass && Task::ClassMethods === klass

      [nil, "#{name} is not a SolidJobs::Task (include SolidJobs::Task)", false]
    rescue NameError => e
      [nil, "unknown task #{name} (#{e.message.lines.first.strip}); is the worker running the code that enqueued it (--require)?",
       true]
    rescue Ractor::IsolationError, Ractor::UnsafeError => e
      # Autoloading (Rails, Zeitwerk) cannot run in a non-main Ractor.
      [nil, "task #{name} cannot be loaded inside a Ractor (#{e.class}: #{e.message}); load it eagerly with --require, " \
            "or use execution_mode = :thread", false]
    end
  end
end
