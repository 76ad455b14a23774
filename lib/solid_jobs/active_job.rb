# frozen_string_literal: true

require "active_job"
require "solid_jobs"

module SolidJobs
  # Runs one Active Job job: the envelope's only argument is Active Job's
  # serialized job (`job.serialize`), and `ActiveJob::Base.execute` runs it
  # with Active Job's callbacks, `retry_on` and `discard_on` (and, under
  # Rails, the app's executor and reloader).
  #
  # Active Job's execution path is not Ractor-safe, so the wrapper runs on
  # the node's thread workers (`execution: :thread`, see SolidJobs::Lanes).
  #
  # max_failures 1: Active Job owns retries. `retry_on` re-enqueues a new job
  # through the adapter and this execution succeeds; an exception that
  # escapes Active Job (retry_on's attempts exhausted, or not handled at
  # all) archives the job at once instead of starting a second, multiplying
  # retry schedule. Raise it with
  # `SolidJobs::ActiveJobWrapper.task_options max_failures: N` at boot to let
  # SolidJobs retry such jobs too (docs/rails.md, "Retries").
  class ActiveJobWrapper
    include Task
    task_options execution: :thread, max_failures: 1

    def execute_task(job_data)
      job_class = job_data["job_class"] if job_data.is_a?(Hash)
      # A job class this worker does not define yet (producers deployed
      # first) waits like an unknown task instead of being archived by
      # max_failures 1. Only a missing constant: a NameError inside the
      # job's code is an ordinary failure.
      if job_class.is_a?(String) && !::ActiveSupport::Inflector.safe_constantize(job_class)
        raise UnknownTaskError,
              "unknown Active Job class #{job_class}; is the worker running the code that enqueued it (--require)?"
      end

      # The id is known only after the job was serialized: Active Job's
      # `provider_job_id` inside perform is this job's SolidJobs id.
      if job_data.is_a?(Hash) && job_data["provider_job_id"].nil? && (id = Executor.current_job_id)
        job_data = job_data.merge("provider_job_id" => id)
      end
      ::ActiveJob::Base.execute(job_data)
      nil # the job's return value is not kept
    end
  end

  # Active Job helpers that its 6.1 API lacks.
  module ActiveJob
    module_function

    # Enqueues many Active Job jobs with one round trip per channel and
    # due time (Active Job 6.1 has no `perform_all_later`; like Rails 7.1's,
    # this runs no enqueue callbacks). Sets each job's provider_job_id;
    # returns the number of jobs enqueued.
    #
    #   SolidJobs::ActiveJob.enqueue_all(users.map { |u| WelcomeMailJob.new(u.id) })
    def enqueue_all(jobs)
      jobs = jobs.to_a
      jobs.group_by { |job| [job.queue_name.to_s, job.scheduled_at && (job.scheduled_at.to_f * 1000).round, priority_for(job)] }
          .sum do |(queue, due_ms, priority), group|
            ids = Publisher.publish(ActiveJobWrapper, group.map { |job| [job.serialize] },
                                    channel: channel_for(queue), due_ms: due_ms, priority: priority)
            group.zip(ids).each do |job, id|
              job.provider_job_id = id
              # Rails 7.1+ reads it after perform_all_later (6.1 has no such attribute).
              job.successfully_enqueued = !id.nil? if job.respond_to?(:successfully_enqueued=)
            end
            ids.compact.size
          end
    end

    # Active Job priority (lower runs first, any Integer, nil for none) onto
    # SolidJobs' 0..9, monotone so the common values keep their order: 0 and
    # nil are 5, the default; small negatives and positives get a level of
    # their own, large ones share the extremes (docs/flow-control.md).
    PRIORITY_TABLE = [[-100, 0], [-50, 1], [-20, 2], [-10, 3], [-1, 4], [0, 5], [9, 6], [19, 7], [49, 8]].freeze

    # The SolidJobs priority of an Active Job job (or of its priority):
    # `config.active_job_priority` when set, else PRIORITY_TABLE.
    def priority_for(job_or_priority)
      priority = job_or_priority.is_a?(::ActiveJob::Base) ? job_or_priority.priority : job_or_priority
      mapping = SolidJobs.config.active_job_priority
      level = mapping ? mapping.call(priority) : table_priority(priority)
      return level if level.is_a?(Integer) && level.between?(0, 9)

      raise ConfigurationError, "config.active_job_priority returned #{level.inspect} for #{priority.inspect}; " \
                                "it must return an Integer from 0 to 9"
    end

    def table_priority(priority)
      return Publisher::DEFAULT_PRIORITY if priority.nil?

      unless priority.is_a?(Integer)
        raise ArgumentError, "Active Job priority #{priority.inspect} is not an Integer (SolidJobs maps Integers onto 0..9)"
      end

      PRIORITY_TABLE.each { |upto, level| return level if priority <= upto }
      9
    end

    # Active Job's queue name is the SolidJobs channel, unchanged.
    def channel_for(queue_name)
      name = queue_name.to_s
      return name if name.match?(Configuration::CHANNEL_NAME)

      raise ArgumentError, "Active Job queue #{queue_name.inspect} cannot be a SolidJobs channel: " \
                           "use 1-100 characters from A-Z a-z 0-9 _ - ."
    end

    # Writes one job now (`due_ms` nil) or for later.
    def publish(job, due_ms)
      id = Publisher.publish(ActiveJobWrapper, [[job.serialize]], channel: channel_for(job.queue_name), due_ms: due_ms,
                                                                  priority: priority_for(job)).first
      job.provider_job_id = id
    end
  end
end

module ActiveJob
  module QueueAdapters
    # `config.active_job.queue_adapter = :solid_jobs`. Each job becomes one
    # SolidJobs envelope for SolidJobs::ActiveJobWrapper on the channel named
    # by its queue (`queue_as`); `set(wait:)` and `set(wait_until:)` become
    # scheduled SolidJobs jobs. Only SolidJobs envelopes and keys are written.
    # `priority` maps onto SolidJobs' 0..9 (SolidJobs::ActiveJob.priority_for):
    # within a channel, lower runs first, as Active Job documents.
    class SolidJobsAdapter
      def enqueue(job)
        SolidJobs::ActiveJob.publish(job, nil)
      end

      def enqueue_at(job, timestamp)
        SolidJobs::ActiveJob.publish(job, (timestamp.to_f * 1000).round)
      end

      # `perform_all_later` (Rails 7.1+): one round trip per channel, due
      # time and priority. Returns the number of jobs enqueued.
      def enqueue_all(jobs)
        SolidJobs::ActiveJob.enqueue_all(jobs)
      end

      # Rails 7.2 asks this when `enqueue_after_transaction_commit` is left
      # at :default: true defers a `perform_later` inside an Active Record
      # transaction until it commits, and drops it on rollback. A job must
      # not run before the rows it reads are visible to its worker.
      def enqueue_after_transaction_commit?
        true
      end

      # Rails 8.1 job continuations ask whether the worker is shutting
      # down, to stop at the next step and resume elsewhere. True on a node
      # that has stopped claiming (TERM, a `shutdown` request, Conductor#stop);
      # false outside a SolidJobs worker.
      def stopping?
        SolidJobs.stopping?
      end
    end
  end
end
