# frozen_string_literal: true

# Jobs file for the SolidEngine worker of benchmark/engine.rb:
#
#   SOLID_JOBS_BENCH_ENGINE_URL=unix:///tmp/x/engine.sock \
#     solid-jobs --require ./benchmark/engine_jobs.rb --channel bench
#
# The solid-jobs CLI has only --redis-url, so the engine backend comes from
# the environment. The tasks are those of benchmark/jobs.rb, so both
# backends run exactly the same no-op task.

require_relative "jobs"

engine_url = ENV.fetch("SOLID_JOBS_BENCH_ENGINE_URL") do
  abort "benchmark/engine_jobs.rb: set SOLID_JOBS_BENCH_ENGINE_URL to the engine's unix:// or tcp:// URL"
end

SolidJobs.configure do |c|
  c.backend = :solid_engine
  c.url = engine_url
  c.backends = {solid_engine: {adapter: :solid_engine, url: engine_url}}
end
