# frozen_string_literal: true

module SolidJobs
  # Mixed nodes. Active Job, Rails code and the warm pool's executor cannot
  # run inside a Ractor, while ordinary tasks should keep their Ractors. A
  # node in :ractor mode that has such tasks runs two lanes of workers on one
  # native dispatcher:
  #
  # - the Ractor lane: `concurrency` worker Ractors;
  # - the thread lane: `thread_concurrency` worker threads in the main Ractor,
  #   for the tasks whose options say `execution: :thread`.
  #
  # The dispatcher routes each job by task name in Rust (see
  # crates/solid_core/src/hub.rs): a Ractor worker that takes a thread task
  # hands it to the thread lane, waiting for room (bounded, so a node does
  # not hoard claimed jobs); a thread worker runs an ordinary task itself
  # only when the Ractor lane is full. A task class the dispatcher was not
  # told about (a subclass defined after start) is caught by the worker,
  # which hands it over the same way. A handed-over job stays claimed and in
  # flight; at shutdown one still waiting is requeued unstarted.
  module Lanes
    RACTOR = 0
    THREAD = 1
    # Active Record's default connection pool size: each thread worker may
    # hold one connection while it runs a job.
    AUTO_THREAD_CONCURRENCY = 5
    # Loaded with SolidJobs itself, so its presence alone asks for no threads.
    BUILT_IN_THREAD_TASKS = %w[SolidJobsGenericExecutor].freeze

    module_function

    def thread_only?(task_class)
      task_class.solid_jobs_options[:execution] == :thread
    end

    # Names of the loaded task classes that must run in a thread. From
    # Task's registry, not an ObjectSpace scan: asking every class in the
    # process (`include?`, `respond_to?`, `name`) runs whatever those
    # classes redefined; one that does `extend Enumerable` answers
    # `include?` by calling `each`, and a Railtie answers `respond_to?` by
    # building an instance.
    def thread_task_names
      Task.classes.filter_map { |klass| Reflection.name(klass) if thread_only?(klass) }.uniq.sort
    end

    # Thread workers for a node: none in :thread mode (every worker is a
    # thread already); config.thread_concurrency when set; otherwise
    # AUTO_THREAD_CONCURRENCY when Rails or a thread task is loaded.
    def thread_workers(config, thread_tasks = thread_task_names)
      return 0 unless config.execution_mode == :ractor
      return config.thread_concurrency if config.thread_concurrency

      defined?(::Rails) || (thread_tasks - BUILT_IN_THREAD_TASKS).any? ? AUTO_THREAD_CONCURRENCY : 0
    end

    # Opens the dispatcher's lanes, each bounded to its worker count, and
    # assigns the thread tasks to the thread lane.
    def open(dispatcher, ractor_workers, thread_workers, thread_tasks)
      dispatcher.open_lanes([ractor_workers, thread_workers])
      thread_tasks.each { |name| dispatcher.assign_lane(name, THREAD) }
    end
  end
end
