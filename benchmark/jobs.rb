# frozen_string_literal: true

# Jobs for the benchmarks (throughput.rb, engine.rb, comparison.rb,
# stress.rb), loaded three ways:
#
#   * by `sidekiq -r ./benchmark/jobs.rb`      -> Sidekiq workers only
#   * by `solid-jobs --require ./benchmark/jobs.rb` -> SolidJobs tasks only
#   * by a benchmark itself (both libraries loaded) -> both, to enqueue
#
# The solid-jobs CLI loads solid_jobs before this file, so a process without
# SolidJobs is the Sidekiq one; each worker process then loads only its own
# library and the comparison is not skewed by the other's code.
#
# The checks look for SolidJobs::Task, not SolidJobs: under Bundler the
# gemspec loads solid_jobs/version, so `SolidJobs` exists in every process,
# the Sidekiq one included.
#
# Every Sidekiq worker and its SolidJobs twin call the same body in
# support/job_bodies.rb. The trailing `n` (job number) is optional so
# throughput.rb's argument lists still fit.
#
# Worker-process environment read here (set by comparison.rb / stress.rb):
#   BENCH_STATS_DIR       record allocations (support/worker_stats.rb)
#   BENCH_LEDGER_DIR      record each job number (support/job_ledger.rb)
#   BENCH_EXECUTION_MODE  SolidJobs execution mode, for a worker started
#                         through a factory that has no such flag

require_relative "support/job_bodies"
require_relative "support/worker_stats"

require "sidekiq" unless defined?(SolidJobs::Task)

# Only worker processes get the variable; the benchmark process never does.
Bench::WorkerStats.install(ENV["BENCH_STATS_DIR"]) if ENV["BENCH_STATS_DIR"]

if defined?(Sidekiq)
  # Sidekiq logs every job at INFO; at 20k jobs that is a benchmark of the
  # logger, not of the job system.
  Sidekiq.configure_server { |config| config.logger.level = Logger::WARN }
  # Sidekiq 6.4.1 passes BRPOP's timeout positionally, and redis-rb 4.8
  # (Debian pairs the two) prints a two-line deprecation warning on every
  # fetch, i.e. on every job, and another on every push (SADD's return
  # type). Writing them out would slow Sidekiq down for a reason that has
  # nothing to do with its design, and bury the benchmark's output.
  Redis.silence_deprecations = true

  class SidekiqNoop
    include Sidekiq::Worker
    sidekiq_options queue: "bench", retry: false

    def perform(n) = Bench::JobBodies.noop(n)
  end

  class SidekiqCpu
    include Sidekiq::Worker
    sidekiq_options queue: "bench", retry: false

    def perform(iterations, n = nil) = Bench::JobBodies.cpu(iterations, n)
  end

  class SidekiqIo
    include Sidekiq::Worker
    sidekiq_options queue: "bench", retry: false

    def perform(seconds, n = nil) = Bench::JobBodies.io(seconds, n)
  end

  class SidekiqMixed
    include Sidekiq::Worker
    sidekiq_options queue: "bench", retry: false

    def perform(iterations, seconds, n) = Bench::JobBodies.mixed(iterations, seconds, n)
  end
end

if defined?(SolidJobs::Task)
  # The CLI applies its flags after loading this file, and sets the
  # execution mode only when --execution-mode is given, so this stands.
  SolidJobs.configure { |c| c.execution_mode = ENV["BENCH_EXECUTION_MODE"] } if ENV["BENCH_EXECUTION_MODE"]

  class SolidNoop
    include SolidJobs::Task
    task_options channel: "bench"

    def execute_task(n) = Bench::JobBodies.noop(n)
  end

  class SolidCpu
    include SolidJobs::Task
    task_options channel: "bench"

    def execute_task(iterations, n = nil) = Bench::JobBodies.cpu(iterations, n)
  end

  class SolidIo
    include SolidJobs::Task
    task_options channel: "bench"

    def execute_task(seconds, n = nil) = Bench::JobBodies.io(seconds, n)
  end

  class SolidMixed
    include SolidJobs::Task
    task_options channel: "bench"

    def execute_task(iterations, seconds, n) = Bench::JobBodies.mixed(iterations, seconds, n)
  end
end
