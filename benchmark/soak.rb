# frozen_string_literal: true

# Soak: steady load on one solid-jobs worker process for a long time, to see
# whether memory or latency drift.
#
#   SOLID_JOBS_SOAK=1 SOLID_JOBS_SOAK_SECONDS=600 bundle exec rake soak
#   SOLID_JOBS_SOAK=1 SOLID_JOBS_SOAK_SMOKE=1 bundle exec rake soak   # 6 s, for tests
#
# Environment (defaults in parentheses):
#   SOLID_JOBS_SOAK_SECONDS (600)       load duration per backend
#   SOLID_JOBS_SOAK_RATE (500)          jobs enqueued per second
#   SOLID_JOBS_SOAK_INTERVAL (10)       seconds between samples
#   SOLID_JOBS_SOAK_CONCURRENCY (2)     worker concurrency
#   SOLID_JOBS_SOAK_BACKENDS (redis)    "redis", "engine" or "redis,engine"
#                                       (SolidEngine, memory durability)
#   SOLID_JOBS_SOAK_SMOKE=1             6 s at 200 jobs/s, 1 s interval; writes
#                                       no results unless an output dir is set
#   SOLID_JOBS_SOAK_OUTPUT_DIR (benchmark/results)  where soak.md and soak.csv go
#
# One producer (this process) enqueues at the fixed rate, one job at a time
# through Task.enqueue, on schedule (after a stall it catches up, so the
# average rate holds). The mix: 8 in 10 empty jobs, 1 with a short CPU
# burst, 1 with nested arguments (benchmark/latency_jobs.rb). Every interval
# it samples the worker's RSS and PSS (/proc), the backend's memory (Redis
# used_memory, or the engine server's RSS), the backlog, the jobs done, and
# the enqueue→start latency of the jobs that started in the interval
# (support/start_log.rb). After the load it waits for the backlog to drain,
# stops the worker and checks every job ran exactly once and none failed.
#
# Exit status: non-zero when jobs were lost, failed or ran twice, when a
# memory gauge kept growing past its bound (support/soak_report.rb explains
# the bound), or when the soak could not run.

$LOAD_PATH.unshift(File.expand_path("../lib", __dir__))
require "solid_jobs"
require "sidekiq" # only for the version in the shared results header
require "redis"
require "fileutils"
require "tmpdir"
require_relative "support/harness"
require_relative "support/engine_server"
require_relative "support/worker_process"
require_relative "support/e2e_systems"
require_relative "support/start_log"
require_relative "support/latency_stats"
require_relative "support/proc_facts"
require_relative "support/soak_gauges"
require_relative "support/soak_report"
require_relative "latency_jobs"

module Bench
  SoakSettings = Struct.new(:seconds, :rate, :interval, :concurrency, :backends, :output_dir, keyword_init: true)

  class Soak < Harness
    ROOT = File.expand_path("..", __dir__)
    DEFAULT_OUTPUT_DIR = File.join(ROOT, "benchmark/results")
    JOBS_FILE = "./benchmark/latency_jobs.rb"
    BACKENDS = %w[redis engine].freeze
    BOOT_TIMEOUT = 60
    # After the load: time for the backlog to drain and the last
    # completions to be written.
    DRAIN_TIMEOUT = 60
    # The mix, by job number modulo 10.
    CPU_SLOT = 8
    PAYLOAD_SLOT = 9
    CPU_ITERATIONS = 2000
    PAYLOAD_NOTE = ("x" * 64).freeze

    def self.failure_label = "soak"

    def self.settings(env)
      smoke = smoke?(env, "SOLID_JOBS_SOAK_SMOKE")
      settings = SoakSettings.new(
        seconds: smoke ? 6 : Bench.positive_integer(env, "SOLID_JOBS_SOAK_SECONDS", 600),
        rate: smoke ? 200 : Bench.positive_integer(env, "SOLID_JOBS_SOAK_RATE", 500),
        interval: smoke ? 1 : Bench.positive_integer(env, "SOLID_JOBS_SOAK_INTERVAL", 10),
        concurrency: Bench.positive_integer(env, "SOLID_JOBS_SOAK_CONCURRENCY", 2),
        backends: backends(env.fetch("SOLID_JOBS_SOAK_BACKENDS", "redis")),
        output_dir: output_setting(env, "SOLID_JOBS_SOAK_OUTPUT_DIR", DEFAULT_OUTPUT_DIR, smoke: smoke)
      )
      if settings.seconds < 2 * settings.interval
        raise Failure, "SOLID_JOBS_SOAK_SECONDS (#{settings.seconds}) must be at least twice SOLID_JOBS_SOAK_INTERVAL " \
                       "(#{settings.interval}), or there is no trend to draw"
      end
      settings
    end

    # "redis,engine" -> [:redis, :engine]; a bad value fails before anything starts.
    def self.backends(value)
      names = value.split(",").map(&:strip).uniq
      return names.map(&:to_sym) if !names.empty? && (names - BACKENDS).empty?

      raise Failure, "SOLID_JOBS_SOAK_BACKENDS must list #{BACKENDS.join(" and/or ")}, comma-separated (got #{value.inspect})"
    end

    def run
      open_lab(tmpdir: "solid-jobs-soak")
      # Read once, before anything runs: the commit and load average are
      # those the measurements were taken with.
      @header = results_header
      puts @header, settings_line
      runs = systems.map { |system| soak(system) }
      report = SoakReport.new(runs, seconds: @settings.seconds, interval: @settings.interval)
      publish(report, runs)
      runs.all? { |r| report.passed?(r) } ? 0 : 1
    ensure
      @lab&.close
    end

    private

    def systems
      all = {redis: RedisSystem.new(@lab.children, @lab.redis_server, @lab.redis), engine: EngineSystem.new(@lab.children, @lab.dir)}
      @settings.backends.map { |name| all.fetch(name) }
    end

    def soak(system)
      run = SoakRun.new(backend: system.key, label: "SolidJobs on #{system.label}", samples: [], enqueued: 0,
                        done: 0, failed: 0, started: 0, duplicates: 0)
      puts "", "#{run.label}, #{@settings.seconds} s at #{@settings.rate} jobs/s:"
      system.prepare("soak")
      @starts = StartLog::Reader.new(start_log_path(system))
      @tally = StartLog::Tally.new(@starts)
      worker = system.start_worker(@settings.concurrency, File.join(@lab.dir, "worker-#{system.key}.log"), jobs_file: JOBS_FILE)
      gauge = gauge_for(system)
      run.memory_label = gauge.memory_label
      boot(run, worker)
      steady_load(run, worker, gauge)
      drain(run, worker, gauge)
      stop_worker(worker)
      settle(run, gauge.read)
      system.finish
      run
    rescue Failure, SolidJobs::Error, Redis::BaseError, SystemCallError => e
      worker&.stop # so its log is complete
      message = "#{e.class}: #{e.message}"
      message += "\nworker output (last lines):\n#{worker.log_tail}" if worker
      warn "  #{message.gsub("\n", "\n  ")}"
      run.error = message
      run
    ensure
      worker&.stop
      @starts&.close
      system.cleanup
    end

    # The worker inherits the path through its environment (latency_jobs.rb
    # reads it at load time).
    def start_log_path(system)
      path = File.join(@lab.dir, "starts-#{system.key}.log")
      ENV[StartLog::ENV_NAME] = path
      path
    end

    def gauge_for(system)
      case system.key
      when :redis then RedisGauge.new(@lab.redis, list_key: RedisSystem::LIST)
      when :engine then EngineGauge.new(system.probe, system.server.pid)
      end
    end

    # One job, waited for, so worker boot is not part of the first sample.
    def boot(run, worker)
      enqueue(run)
      @tally.add(@starts.wait_for(1, timeout: BOOT_TIMEOUT, worker: worker))
    end

    # Enqueues on schedule and samples every interval until the last sample.
    def steady_load(run, worker, gauge)
      started_at = Bench.now
      next_sample = started_at + @settings.interval
      samples_due = @settings.seconds / @settings.interval
      sent = 0
      until run.samples.size == samples_due
        now = Bench.now
        if now >= next_sample
          run.samples << sample(run, worker, gauge, now - started_at)
          print_sample(run.samples.last)
          next_sample += @settings.interval
          next
        end
        due = started_at + sent.fdiv(@settings.rate)
        if due > now
          sleep([due, next_sample].min - now)
          next
        end
        enqueue(run)
        sent += 1
      end
    end

    def enqueue(run)
      n = run.enqueued
      stamp = StartLog.now_ns
      case n % 10
      when CPU_SLOT then SolidLatencyCpu.enqueue(stamp, CPU_ITERATIONS)
      when PAYLOAD_SLOT then SolidLatencyPayload.enqueue(stamp, {"n" => n, "tags" => %w[soak mix payload], "note" => PAYLOAD_NOTE})
      else SolidLatency.enqueue(stamp)
      end
      run.enqueued += 1
    end

    def sample(run, worker, gauge, elapsed)
      raise Failure, "the worker exited (#{worker.exit_status.inspect}) during the soak" if worker.exited?

      latencies = @tally.read_new.map(&:latency_ms)
      stats = LatencyStats.of(latencies)
      reading = gauge.read
      SoakSample.new(elapsed: elapsed, enqueued: run.enqueued, done: reading.done, backlog: reading.backlog,
                     started: latencies.size, p50: stats&.p50, p99: stats&.p99, rss_mb: ProcFacts.rss_mb(worker.pid),
                     pss_mb: ProcFacts.pss_mb(worker.pid), backend_mb: reading.memory_mb)
    end

    def print_sample(s)
      puts format("  t=%4ds enqueued %d done %d backlog %d | p50 %s ms p99 %s ms | worker RSS %.1f MB PSS %s MB | backend %.1f MB",
                  s.elapsed.round, s.enqueued, s.done, s.backlog, LatencyStats.ms(s.p50), LatencyStats.ms(s.p99),
                  s.rss_mb || 0, s.pss_mb ? format("%.1f", s.pss_mb) : "n/a", s.backend_mb || 0)
    end

    # Waits until every enqueued job started and its completion was written.
    def drain(run, worker, gauge)
      deadline = Bench.now + DRAIN_TIMEOUT
      loop do
        @tally.read_new
        return if @tally.started >= run.enqueued && gauge.read.done >= run.enqueued
        # The accounting after the stop reports what is missing.
        if Bench.now > deadline
          warn "  drain: not every job finished within #{DRAIN_TIMEOUT}s"
          return
        end
        raise Failure, "the worker exited (#{worker.exit_status.inspect}) while draining" if worker.exited?

        sleep 0.05
      end
    end

    def stop_worker(worker)
      return if worker.stop

      raise Failure, "worker did not exit within #{WorkerProcess::STOP_TIMEOUT}s of TERM and was killed"
    end

    # Counters read after the worker stopped are complete.
    def settle(run, reading)
      @tally.read_new
      run.done = reading.done
      run.failed = reading.failed
      run.started = @tally.started
      run.duplicates = @tally.duplicates
    end

    def publish(report, runs)
      sections = runs.map do |run|
        ["## #{run.label}", "", run.ok? || !run.samples.empty? ? report.samples_table(run) : "(no samples)", "",
         "Trend after the #{report.warmup_seconds.round} s warm-up:", "", report.trend_table(run), "",
         *report.verdict_lines(run).map { |l| "- #{l}" }].join("\n")
      end
      body = sections.join("\n\n")
      puts "", body
      return unless @settings.output_dir

      markdown = "# Soak: SolidJobs under steady load\n\n#{@header}\n\n" \
                 "#{settings_line} #{method_note}\n\n#{body}\n"
      write_results(@settings.output_dir, "soak", markdown, report)
    end

    def settings_line
      "#{@settings.seconds} s per backend at #{@settings.rate} jobs/s, sampled every #{@settings.interval} s; " \
        "worker concurrency #{@settings.concurrency}; backends: #{@settings.backends.join(", ")}."
    end

    def method_note
      "One `solid-jobs` worker process (Ractor workers) against a private redis-server without persistence, or a " \
        "fresh memory-durability `solid-engine-server`. The producer enqueues one job at a time on a fixed schedule " \
        "(8 in 10 empty, 1 with a #{CPU_ITERATIONS}-iteration CPU burst, 1 with nested arguments). Latency is enqueue " \
        "call → `execute_task` entered (CLOCK_MONOTONIC, benchmark/support/start_log.rb) of the jobs started in each " \
        "interval. Memory verdicts: benchmark/support/soak_report.rb. Run at " \
        "#{Time.now.utc.strftime("%Y-%m-%d %H:%M UTC")}; generated by `SOLID_JOBS_SOAK=1 bundle exec rake soak`."
    end
  end
end

exit Bench::Soak.main(ENV) if $PROGRAM_NAME == __FILE__
