# frozen_string_literal: true

SolidJobs.configure do |config|
  config.namespace = "example_app"
  # Worker Ractors for plain tasks (FibonacciTask); Active Job jobs and the
  # warm pool's executor run on thread workers, 5 by default under Rails
  # (config.thread_concurrency).
  config.concurrency = 2
  config.channels = [["default", 2], "mailers"]
  config.shutdown_timeout = 10
end
