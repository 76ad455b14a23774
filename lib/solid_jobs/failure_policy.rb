# frozen_string_literal: true

module SolidJobs
  # Decides what happens to a job whose task raised.
  #
  # Default: retry after the native capped exponential backoff with equal
  # jitter (docs/reliability.md) until `max_failures` failures, then archive.
  module FailurePolicy
    module_function

    # Returns [:retry, seconds], [:archive, reason] or [:drop, reason].
    def decide(task_class, job, error, failures, _first_failure_ms)
      if failures >= job.max_failures
        [:archive, "failed #{failures} time(s), reaching max_failures #{job.max_failures}"]
      else
        [:retry, Native.default_backoff(failures)]
      end
    end
  end
end
