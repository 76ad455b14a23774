# frozen_string_literal: true

# What `solid-jobs --require` loads in the CLI tests: the tasks, and the
# namespace the test chose (so parallel tests never share keys).
require_relative "tasks"

SolidJobs.configure do |c|
  c.namespace = ENV.fetch("SOLID_JOBS_TEST_NAMESPACE")
  c.heartbeat_interval = 0.5
  c.recovery_delay = 2
end
