# frozen_string_literal: true

# Tasks whose outcomes test/metrics_test.rb counts in /metrics: one that
# fails its first attempt and succeeds on its retry (retried soon, so the
# test does not wait for the default backoff), and one given up at its
# first failure.
class MetricsFlakyTask
  include SolidJobs::Task
  task_options max_failures: 3

  retry_delay { |_failures, _error, _envelope| 0.2 }

  def execute_task(path, label)
    first = !(File.exist?(path) && File.readlines(path).any? { |line| line.start_with?("attempt #{label} ") })
    Ledger.append(path, "attempt #{label} ")
    raise "first attempt of #{label} fails" if first

    Ledger.append(path, "done #{label}")
  end
end

class MetricsDoomedTask
  include SolidJobs::Task
  task_options max_failures: 1

  def execute_task(path, label)
    Ledger.append(path, "attempt #{label}")
    raise ArgumentError, "given up on purpose: #{label}"
  end
end
