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
    end

    module ClassMethods
      def task_options(**options)
        own = Configuration.validate_task_options(options)
        merged = (instance_variable_defined?(:@solid_jobs_task_options) ? @solid_jobs_task_options : {}).merge(own)
        @solid_jobs_task_options = Ractor.make_shareable(merged)
      end

      # Options in effect: configured defaults, then superclasses, then own.
      def solid_jobs_options
        inherited = superclass.respond_to?(:solid_jobs_options) ? superclass.solid_jobs_options : SolidJobs.config.default_task_options
        own = instance_variable_defined?(:@solid_jobs_task_options) ? @solid_jobs_task_options : nil
        own ? inherited.merge(own) : inherited
      end

      def solid_jobs_task? = true

      # Enqueues one job; returns its id.
      def enqueue(*arguments)
        Publisher.publish(self, [arguments]).first
      end

      # Enqueues one job to run after `seconds`; returns its id.
      def enqueue_after(seconds, *arguments)
        unless seconds.is_a?(Numeric) && seconds.finite? && seconds >= 0
          raise ArgumentError, "enqueue_after needs a delay in seconds >= 0 (got #{seconds.inspect})"
        end

        Publisher.publish(self, [arguments], due_ms: Publisher.now_ms + (seconds * 1000).round).first
      end

      # Enqueues one job to run at `time` (a Time, or epoch seconds).
      def schedule_at(time, *arguments)
        epoch = case time
                when Time then time.to_f
                when Numeric then time
                else time.respond_to?(:to_time) ? time.to_time.to_f : time
                end
        raise ArgumentError, "schedule_at needs a Time or epoch seconds (got #{time.inspect})" unless epoch.is_a?(Numeric) && epoch.finite?

        Publisher.publish(self, [arguments], due_ms: (epoch * 1000).round).first
      end

      # Enqueues many jobs in one round trip: `enqueue_many([[1], [2]])`.
      # Every argument list is validated before anything is written.
      def enqueue_many(argument_lists)
        unless argument_lists.is_a?(Array) && argument_lists.all?(Array)
          raise ArgumentError, "enqueue_many takes an Array of argument Arrays, e.g. [[1], [2]]"
        end

        Publisher.publish(self, argument_lists)
      end
    end
  end
end
