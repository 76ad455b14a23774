# frozen_string_literal: true

# Tasks for the warm pool tests. Loaded by the test process (to enqueue) and,
# through a temporary app's config/environment.rb, by real warm workers
# (script/warm_worker.rb). Each holds a Mutex in a class-level instance
# variable, which is what sends its jobs to the warm pool under Rails.
class WarmLedgerTask
  include SolidJobs::Task
  task_options channel: "warm", max_failures: 3

  @lock = Mutex.new
  class << self
    attr_reader :lock
  end

  def execute_task(path, label, seconds = 0)
    self.class.lock.synchronize do
      sleep(seconds)
      File.open(path, "a") { |f| f.write("#{label} #{Process.pid}\n") }
    end
    {"label" => label, "pid" => Process.pid}
  end
end

class WarmFailingTask < WarmLedgerTask
  def execute_task(path, label)
    File.open(path, "a") { |f| f.write("attempt #{label}\n") }
    {}.fetch("missing")
  end
end

# Not a SolidJobs task: the warm worker falls back to `perform`.
class WarmPerformOnly
  def perform(a, b) = a + b
end
