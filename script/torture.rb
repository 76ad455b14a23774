# frozen_string_literal: true

# The full torture run (see test/support/torture.rb):
#
#   SOLID_JOBS_TORTURE=1 TORTURE_JOBS=100000 bundle exec rake torture
#
# Environment: TORTURE_JOBS (100000), TORTURE_WORKERS (4), TORTURE_CONCURRENCY (2),
# TORTURE_KILLS (12), TORTURE_REDIS_RESTARTS (2), TORTURE_WORK_MS (1),
# TORTURE_TIMEOUT (1800), TORTURE_SEED (random), TORTURE_RECURRING (1: every
# worker also runs an every: 1 schedule, checked for ticks enqueued twice).
# Exits 1 when a job was lost or left behind, or a tick enqueued twice.
$LOAD_PATH.unshift(File.expand_path("../lib", __dir__))
require "solid_jobs"
require_relative "../test/support/tasks"
require_relative "../test/support/torture"

unless ENV["SOLID_JOBS_TORTURE"] == "1"
  abort "the torture run SIGKILLs processes and restarts Redis: set SOLID_JOBS_TORTURE=1 to run it"
end
Warning[:experimental] = false

env = ->(name, default) { Integer(ENV.fetch(name, default)) }
result = Torture.new(
  jobs: env.("TORTURE_JOBS", 100_000), workers: env.("TORTURE_WORKERS", 4), concurrency: env.("TORTURE_CONCURRENCY", 2),
  kills: env.("TORTURE_KILLS", 12), redis_restarts: env.("TORTURE_REDIS_RESTARTS", 2), work_ms: env.("TORTURE_WORK_MS", 1),
  timeout: env.("TORTURE_TIMEOUT", 1800), recurring: env.("TORTURE_RECURRING", 1) == 1,
  seed: ENV["TORTURE_SEED"] ? Integer(ENV["TORTURE_SEED"]) : Random.new_seed
).run
puts result.summary
puts "recovery delays (s): #{result.recovery_delays.map { |d| d.round(2) }.sort.join(", ")}"
exit(result.ok? ? 0 : 1)
