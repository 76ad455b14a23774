# frozen_string_literal: true

# Enqueue→start latency of SolidJobs (on Redis and on SolidEngine) against
# Sidekiq 6.4.1, each run by its own CLI as a separate worker process.
#
#   bundle exec rake benchmark:latency
#   BENCH_SMOKE=1 bundle exec rake benchmark:latency   # seconds, for tests
#
# Environment (defaults in parentheses):
#   BENCH_LATENCY_JOBS (500)          jobs in the idle-worker phase
#   BENCH_LATENCY_IDLE_ROUNDS (8)     jobs in the after-idleness phase
#   BENCH_LATENCY_CONCURRENCY (2,8)   worker concurrencies, a list
#   BENCH_LATENCY_PAUSE_MS (10)       pause after each start, idle-worker phase
#   BENCH_SMOKE=1                     30 jobs, 2 rounds after 0.5 s idle,
#                                     concurrency 2; writes no results unless
#                                     BENCH_OUTPUT_DIR is set
#   BENCH_OUTPUT_DIR (benchmark/results)  where latency.md and latency.csv go
#
# Per system and concurrency, one worker process (fresh Redis database or
# fresh memory-durability engine server), then:
#   warm-up           a few jobs, one at a time, not reported (boot, first calls);
#   idle workers      enqueue one job, wait until it started, pause, repeat;
#   after idleness    the worker sits idle IDLE_SECONDS (2.5 s), then one job:
#                     shows any poll interval a worker falls back to when idle.
# The producer stamps each job right before the enqueue call and the job
# stamps its own start (support/start_log.rb), so the figure is enqueue call
# → execute_task/perform entered. Exit status is non-zero only when a case
# could not be measured; missing a target is a result, not an error.

$LOAD_PATH.unshift(File.expand_path("../lib", __dir__))
require "solid_jobs"
require "sidekiq"
require "redis"
require "fileutils"
require "tmpdir"
require_relative "support/harness"
require_relative "support/engine_server"
require_relative "support/worker_process"
require_relative "support/e2e_systems"
require_relative "support/sidekiq_system"
require_relative "support/start_log"
require_relative "support/latency_stats"
require_relative "support/latency_report"
require_relative "latency_jobs"

module Bench
  LatencySettings = Struct.new(:jobs, :idle_rounds, :idle_seconds, :pause, :concurrencies, :warmup, :output_dir,
                               keyword_init: true)

  class LatencyBenchmark < Harness
    ROOT = File.expand_path("..", __dir__)
    DEFAULT_OUTPUT_DIR = File.join(ROOT, "benchmark/results")
    JOBS_FILE = "./benchmark/latency_jobs.rb"
    IDLE_SECONDS = 2.5
    WARMUP_JOBS = 20
    # Generous: the first job also waits for the worker to boot.
    BOOT_TIMEOUT = 60
    START_TIMEOUT = 10

    # How each system is asked to run SolidLatency / SidekiqLatency.
    ENQUEUE = {
      redis: ->(stamp) { SolidLatency.enqueue(stamp) },
      engine: ->(stamp) { SolidLatency.enqueue(stamp) },
      sidekiq: ->(stamp) { Sidekiq::Client.push("class" => SidekiqLatency, "args" => [stamp]) }
    }.freeze

    def self.settings(env)
      smoke = smoke?(env)
      LatencySettings.new(
        jobs: smoke ? 30 : Bench.positive_integer(env, "BENCH_LATENCY_JOBS", 500),
        idle_rounds: smoke ? 2 : Bench.positive_integer(env, "BENCH_LATENCY_IDLE_ROUNDS", 8),
        idle_seconds: smoke ? 0.5 : IDLE_SECONDS,
        pause: Bench.positive_integer(env, "BENCH_LATENCY_PAUSE_MS", 10) / 1000.0,
        concurrencies: smoke ? [2] : integer_list(env, "BENCH_LATENCY_CONCURRENCY", [2, 8]),
        warmup: smoke ? 5 : WARMUP_JOBS,
        output_dir: output_setting(env, "BENCH_OUTPUT_DIR", DEFAULT_OUTPUT_DIR, smoke: smoke)
      )
    end

    def run
      open_lab(tmpdir: "solid-jobs-latency")
      # Read once, before anything runs: the commit and load average are
      # those the measurements were taken with.
      @header = results_header
      puts @header, settings_line
      results = cases.map { |system, concurrency| measure(system, concurrency) }
      publish(results)
      results.all?(&:ok?) ? 0 : 1
    ensure
      @lab&.close
    end

    private

    # The three systems alternate at each concurrency, so drift on a shared
    # host hits all of them alike.
    def cases
      systems = [RedisSystem.new(@lab.children, @lab.redis_server, @lab.redis), EngineSystem.new(@lab.children, @lab.dir),
                 SidekiqSystem.new(@lab.children, @lab.redis_server, @lab.redis)]
      @settings.concurrencies.product(systems).map { |concurrency, system| [system, concurrency] }
    end

    def measure(system, concurrency)
      result = LatencyResult.new(system: system.key, label: label(system), concurrency: concurrency)
      print "#{result.label} c=#{concurrency}: "
      name = "#{system.key}-c#{concurrency}"
      system.prepare(name)
      log = StartLog::Reader.new(start_log_path(name))
      worker = system.start_worker(concurrency, File.join(@lab.dir, "worker-#{name}.log"), jobs_file: JOBS_FILE)
      enqueue = ENQUEUE.fetch(system.key)
      @settings.warmup.times { |i| one_job(enqueue, log, worker, timeout: i.zero? ? BOOT_TIMEOUT : START_TIMEOUT) }
      result.phases = {
        idle_workers: Array.new(@settings.jobs) { one_job(enqueue, log, worker, pause: @settings.pause) },
        after_idle: Array.new(@settings.idle_rounds) do
          sleep @settings.idle_seconds
          one_job(enqueue, log, worker)
        end
      }
      stop_worker(worker)
      system.finish
      puts result.summary
      result
    rescue Failure, SolidJobs::Error, Redis::BaseError, SystemCallError => e
      worker&.stop # so its log is complete
      report_error(result, e, worker)
    ensure
      worker&.stop
      log&.close
      system.cleanup
    end

    # The start log of one case. Its path reaches the worker through the
    # environment it inherits (latency_jobs.rb reads it at load time).
    def start_log_path(name)
      path = File.join(@lab.dir, "starts-#{name}.log")
      ENV[StartLog::ENV_NAME] = path
      path
    end

    # Enqueues one job and waits for it to start; a LatencyMeasurement.
    def one_job(enqueue, log, worker, pause: nil, timeout: START_TIMEOUT)
      stamp = StartLog.now_ns
      enqueue.(stamp)
      enqueue_ms = (StartLog.now_ns - stamp) / 1_000_000.0
      start = log.wait_for(1, timeout: timeout, worker: worker).first
      raise Failure, "job stamped #{stamp} started, but the log names #{start.enqueued_ns}" unless start.enqueued_ns == stamp

      sleep pause if pause
      LatencyMeasurement.new(start.latency_ms, enqueue_ms)
    end

    def stop_worker(worker)
      return if worker.stop

      raise Failure, "worker did not exit within #{WorkerProcess::STOP_TIMEOUT}s of TERM and was killed"
    end

    def label(system) = system.key == :sidekiq ? system.label : "SolidJobs on #{system.label}"

    def report_error(result, error, worker)
      puts "ERROR"
      message = "#{error.class}: #{error.message}"
      message += "\nworker: #{worker.description}\nworker output (last lines):\n#{worker.log_tail}" if worker
      warn "  #{message.gsub("\n", "\n  ")}"
      result.error = message
      result
    end

    def publish(results)
      report = LatencyReport.new(results, idle_seconds: @settings.idle_seconds)
      body = ["Enqueue→start latency, ms:", "", report.table, "", "Targets:", *report.target_lines.map { |l| "- #{l}" }]
      body = with_errors(body, report)
      puts "", body
      return unless @settings.output_dir

      markdown = "# Enqueue→start latency: SolidJobs vs Sidekiq\n\n#{@header}\n\n" \
                 "#{settings_line} #{method_note}\n\n#{body}\n"
      write_results(@settings.output_dir, "latency", markdown, report)
    end

    def settings_line
      format("Idle workers: %d jobs, one at a time, %.0f ms pause after each start; after idleness: %d jobs, each " \
             "after %.1f s idle; %d warm-up jobs per case; concurrency %s.",
             @settings.jobs, @settings.pause * 1000, @settings.idle_rounds, @settings.idle_seconds, @settings.warmup,
             @settings.concurrencies.join(", "))
    end

    def method_note
      "Each system runs as its own CLI process (SolidJobs: `solid-jobs`, Ractor workers; Sidekiq: `sidekiq`, " \
        "BRPOP fetch) against a private redis-server without persistence, or a fresh memory-durability " \
        "`solid-engine-server` on a Unix socket. The producer reads CLOCK_MONOTONIC right before `Task.enqueue` / " \
        "`Sidekiq::Client.push`; the job reads it first thing in `execute_task` / `perform` and appends both to a " \
        "file (benchmark/support/start_log.rb). Percentiles are nearest-rank. \"enqueue call\" is how long the " \
        "enqueue call took in the producer; the job can start before it returns. Run at " \
        "#{Time.now.utc.strftime("%Y-%m-%d %H:%M UTC")}; generated by `bundle exec rake benchmark:latency`."
    end
  end
end

exit Bench::LatencyBenchmark.main(ENV) if $PROGRAM_NAME == __FILE__
