# frozen_string_literal: true

# What a worker started with the wrong --require loads: the settings of
# cli_app.rb, and no task at all (the producers' code is newer, or the
# file that loads the tasks was forgotten).
SolidJobs.configure do |c|
  c.namespace = ENV.fetch("SOLID_JOBS_TEST_NAMESPACE")
  c.heartbeat_interval = Float(ENV.fetch("SOLID_JOBS_TEST_HEARTBEAT", "0.5"))
  c.recovery_delay = Float(ENV.fetch("SOLID_JOBS_TEST_RECOVERY_DELAY", "2"))
  c.unknown_task_retry_for = Float(ENV["SOLID_JOBS_TEST_UNKNOWN_TASK_RETRY_FOR"]) if ENV["SOLID_JOBS_TEST_UNKNOWN_TASK_RETRY_FOR"]
end

if (engine_url = ENV["SOLID_JOBS_TEST_ENGINE_URL"])
  SolidJobs.configure do |c|
    c.backend = :solid_engine
    c.url = engine_url
    c.backends = {solid_engine: {adapter: :solid_engine, url: engine_url, lease: 30.0}}
  end
end
