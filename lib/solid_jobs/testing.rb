# frozen_string_literal: true

module SolidJobs
  # Testing without Redis:
  #
  #   SolidJobs.testing!(:capture) { Task.enqueue(1); Task.captured }  # envelopes, not run
  #   SolidJobs.testing!(:execute) { Task.enqueue(1) }                # runs inline
  #
  # The mode is per thread, so parallel tests do not see each other's jobs.
  # Arguments are validated and JSON round-tripped exactly as in production,
  # so a task sees the same values a worker would give it.
  module Testing
    MODES = %i[capture execute].freeze

    module_function

    def mode = Thread.current[:solid_jobs_testing_mode]
    def active? = !mode.nil?
    def captured = (Thread.current[:solid_jobs_captured] ||= [])

    def with(mode)
      raise ArgumentError, "testing mode must be one of #{MODES.inspect} (got #{mode.inspect})" unless MODES.include?(mode)

      previous = [Thread.current[:solid_jobs_testing_mode], Thread.current[:solid_jobs_captured]]
      Thread.current[:solid_jobs_testing_mode] = mode
      Thread.current[:solid_jobs_captured] = []
      return self unless block_given?

      begin
        yield
      ensure
        Thread.current[:solid_jobs_testing_mode], Thread.current[:solid_jobs_captured] = previous
      end
    end

    def disable!
      Thread.current[:solid_jobs_testing_mode] = nil
      Thread.current[:solid_jobs_captured] = nil
    end

    def publish(task_class, argument_lists, channel, max_failures, due_ms)
      argument_lists.map do |args|
        envelope = Native::Client.build(Reflection.name(task_class), args, channel, max_failures, due_ms)
        publication = Publisher::Publication.new(task_class, envelope, due_ms)
        written = nil
        SolidJobs.config.publish_interceptors.invoke(publication) { written = publication.envelope }
        next nil unless written

        if mode == :execute
          Executor.execute(task_class, written["arguments"], envelope: written)
        else
          captured << written
        end
        written["id"]
      end
    end
  end

  class << self
    # Enables a testing mode for the block (or, without a block, for the
    # current thread until `SolidJobs::Testing.disable!`). Returns the block's value.
    def testing!(mode, &block)
      Testing.with(mode, &block)
    end
  end

  module Task
    module ClassMethods
      # Envelopes of this task captured in `testing!(:capture)`.
      def captured
        task = Reflection.name(self)
        Testing.captured.select { |envelope| envelope["task"] == task }
      end
    end
  end
end
