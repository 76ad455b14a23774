# frozen_string_literal: true

module Bench
  # The SolidJobs tasks whose Redis traffic benchmark/commands.rb counts.
  # They do nothing but raise or return, so every command measured is
  # SolidJobs' own.
  module CommandCountTasks
    # The channel the measured node serves.
    CHANNEL = "bench"

    class Noop
      include SolidJobs::Task
      task_options channel: CHANNEL

      def execute_task(*) = nil
    end

    # Warms a producer's connection on a channel of its own, so the measured
    # enqueue still finds its channel empty (and rings the doorbell).
    class Warmup
      include SolidJobs::Task
      task_options channel: "warmup"

      def execute_task(*) = nil
    end

    # Fails every time; the retry is due long after the measurement ends,
    # so the only promotion in the window is the one the `planned` doorbell
    # triggers at once, which finds nothing due.
    class Failing
      include SolidJobs::Task
      task_options channel: CHANNEL
      retry_delay { 600 }

      def execute_task(*) = raise(ArgumentError, "failing on purpose for benchmark/commands.rb")
    end

    # Scheduled onto a channel no measured node serves: a promotion ends with
    # the job ready in its list, not run.
    class Later
      include SolidJobs::Task
      task_options channel: "later"

      def execute_task(*) = nil
    end
  end
end
