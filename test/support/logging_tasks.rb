# frozen_string_literal: true

# Tasks whose outcomes each produce the log lines test/logging_test.rb
# reads: a retry due within a fraction of a second, a give-up at the first
# failure. Loaded by the test and by its workers (logging_app.rb).
require_relative "tasks"

# Fails its first execution, succeeds on the retry 0.2 s later.
class RetriedOnceTask
  include SolidJobs::Task
  task_options max_failures: 3
  retry_delay { |_failures, _error, _envelope| 0.2 }

  def execute_task(path, label)
    first = !(File.exist?(path) && File.foreach(path).any? { |line| line.start_with?("attempt #{label}") })
    Ledger.append(path, "attempt #{label}")
    raise ArgumentError, "first attempt of #{label} fails" if first

    Ledger.append(path, "done #{label}")
  end
end

# Given up (archived) at its first failure.
class GivenUpTask
  include SolidJobs::Task
  task_options max_failures: 1

  def execute_task(path, label)
    Ledger.append(path, "attempt #{label}")
    raise KeyError, "always fails: #{label}"
  end
end
