# frozen_string_literal: true

# What `solid-jobs --require` loads in tests and the torture driver: the
# tasks, and settings the test chose through the environment (namespace, so
# tests never share keys; short heartbeat and recovery delays).
require_relative "tasks"

# An app class that does `extend Enumerable` with `each` on its instances
# (as RubyGems' resolver log does, which Bundler loads): its `include?` is
# Enumerable's and raises NoMethodError. A worker must start without
# calling methods of classes it did not define.
class AppEventLog
  extend Enumerable

  def each(&) = [].each(&)
end

SolidJobs.configure do |c|
  c.namespace = ENV.fetch("SOLID_JOBS_TEST_NAMESPACE")
  c.heartbeat_interval = Float(ENV.fetch("SOLID_JOBS_TEST_HEARTBEAT", "0.5"))
  c.recovery_delay = Float(ENV.fetch("SOLID_JOBS_TEST_RECOVERY_DELAY", "2"))
  c.prefetch = Integer(ENV["SOLID_JOBS_TEST_PREFETCH"]) if ENV["SOLID_JOBS_TEST_PREFETCH"]
  c.read_timeout = Float(ENV["SOLID_JOBS_TEST_READ_TIMEOUT"]) if ENV["SOLID_JOBS_TEST_READ_TIMEOUT"]
end

# Route every channel to a SolidEngine server when the test asks for it.
if (engine_url = ENV["SOLID_JOBS_TEST_ENGINE_URL"])
  SolidJobs.configure do |c|
    c.backend = :solid_engine
    c.url = engine_url
    c.backends = {solid_engine: {adapter: :solid_engine, url: engine_url, lease: Float(ENV.fetch("SOLID_JOBS_TEST_LEASE", "30")),
                                 password: ENV["SOLID_JOBS_TEST_ENGINE_PASSWORD"]}}
  end
end

# Short observation intervals for tests that read observations.
if (rate = ENV["SOLID_JOBS_TEST_SAMPLE_RATE"])
  SolidJobs.configure { |c| c.telemetry_sample_rate = Integer(rate) }
end

if (interval = ENV["SOLID_JOBS_TEST_OBSERVATION_INTERVAL"])
  SolidJobs.configure { |c| c.observation_interval = Float(interval) }
end

# A recurring schedule for the recurring tests: LedgerTask every N seconds
# on its own channel (which the nodes do not serve unless told, so the
# jobs stay countable by tick), its ledger line labelled "tick".
# SOLID_JOBS_TEST_RECURRING_CRON gives a cron spec instead.
if (every = ENV["SOLID_JOBS_TEST_RECURRING_EVERY"])
  timing = (cron = ENV["SOLID_JOBS_TEST_RECURRING_CRON"]) ? {cron: cron} : {every: Integer(every)}
  SolidJobs.configure do |c|
    c.recurring = {"probe" => {task: "LedgerTask", **timing,
                               arguments: [ENV.fetch("SOLID_JOBS_TEST_RECURRING_LEDGER", "/dev/null"), "tick"],
                               channel: ENV.fetch("SOLID_JOBS_TEST_RECURRING_CHANNEL", "recurring"),
                               missed: ENV.fetch("SOLID_JOBS_TEST_RECURRING_MISSED", "latest")}}
  end
end
