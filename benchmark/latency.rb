# frozen_string_literal: true

# Enqueue→start latency of SolidJobs (on Redis and on SolidEngine) against
# Sidekiq 6.4.1, each run by its own CLI as a separate worker process.
#
#   bundle exec rake benchmark:latency
#   BENCH_SMOKE=1 bundle exec rake benchmark:latency   # seconds, for tests
#
# Environment (defaults in parentheses):
#   BENCH_CLIENTS      comma list (solid-jobs,solid-jobs-engine,sidekiq)
#   BENCH_CONCURRENCY  worker concurrencies, a list (2,8)
#   BENCH_JOBS         idle-workers=N (500) and after-idle=N (8) jobs
#   BENCH_PAUSE_MS     pause after each start, idle-worker phase (10)
#   BENCH_SMOKE=1      30 and 2 jobs, 0.5 s idle, concurrency 2
#   BENCH_OUTPUT_DIR   where latency.{md,csv} go (benchmark/results; nowhere in a smoke run)
#
# Per client and concurrency, one worker process (fresh Redis database or
# fresh memory-durability engine server), then:
#   warm-up           a few jobs, one at a time, not reported (boot, first calls);
#   idle workers      enqueue one job, wait until it started, pause, repeat;
#   after idleness    the worker sits idle IDLE_SECONDS (2.5 s), then one job:
#                     shows any poll interval a worker falls back to when idle.
# The producer stamps each job right before the enqueue call and the job
# stamps its own start (StartLog in benchmark/jobs.rb), so the figure is
# enqueue call → execute_task/perform entered.

require_relative "support/systems"
require "sidekiq"
require_relative "jobs"

module Bench
  class Latency < Harness
    IDLE_SECONDS = 2.5
    # Generous: the first job also waits for the worker to boot.
    BOOT_TIMEOUT = 60
    START_TIMEOUT = 10
    PHASES = {"idle-workers" => "idle workers", "after-idle" => "after idleness"}.freeze
    # Target for SolidJobs with idle workers (Sidekiq measured about 1.4 ms
    # on the 2-core development VM).
    IDLE_P50_TARGET_MS = 0.7
    # "No polling delay after idleness": the after-idleness p50 is within
    # this much of the idle-worker p50. A worker that fell back to polling
    # every P ms would add about P/2 to the median, so even a 5 ms poll
    # shows; 1 ms leaves room for the colder caches of a process that slept.
    AFTER_IDLE_TOLERANCE_MS = 1.0
    CSV_HEADER = %w[system concurrency phase idle_s jobs p50_ms p95_ms p99_ms max_ms mean_ms enqueue_call_p50_ms error].freeze

    # One client at one concurrency: {phase => [[latency ms, enqueue call ms]]},
    # or the error that stopped the case.
    Result = Struct.new(:client, :label, :concurrency, :phases, :error, keyword_init: true) do
      def ok? = error.nil?
      def stats(phase, index = 0) = LatencyStats.of((phases || {}).fetch(phase, []).map { |m| m[index] })
    end

    def initialize(settings)
      super
      @clients = settings.choices("BENCH_CLIENTS", ClientNames, %w[solid-jobs solid-jobs-engine sidekiq])
      @concurrencies = settings.integers("BENCH_CONCURRENCY", @smoke ? [2] : [2, 8])
      @jobs = settings.per_kind("BENCH_JOBS",
                                @smoke ? {"idle-workers" => 30, "after-idle" => 2} : {"idle-workers" => 500, "after-idle" => 8})
      @pause = settings.integer("BENCH_PAUSE_MS", 10) / 1000.0
      @idle_seconds = @smoke ? 0.5 : IDLE_SECONDS
      @warmup = @smoke ? 5 : 20
    end

    private

    def measure
      puts settings_line
      # The clients alternate at each concurrency, so drift on a shared host
      # hits all of them alike.
      @results = @concurrencies.product(@clients).map { |concurrency, client| measure_case(Bench.system(client), concurrency) }
      report
      @results.all?(&:ok?)
    end

    def measure_case(system, concurrency)
      result = Result.new(client: system.name, label: system.label, concurrency: concurrency)
      print "#{result.label} c=#{concurrency}: "
      system.prepare(@lab)
      path = File.join(@lab.dir, "starts-#{system.name}-c#{concurrency}.log")
      log = StartLog::Reader.new(path)
      workers = system.start_workers(concurrency, env: {"BENCH_START_LOG" => path})
      job = system.job("Latency")
      @warmup.times { |i| one_job(system, job, log, workers, timeout: i.zero? ? BOOT_TIMEOUT : START_TIMEOUT) }
      idle = Array.new(@jobs.fetch("idle-workers")) { one_job(system, job, log, workers, pause: @pause) }
      after = Array.new(@jobs.fetch("after-idle")) do
        sleep @idle_seconds
        one_job(system, job, log, workers)
      end
      result.phases = {"idle-workers" => idle, "after-idle" => after}
      workers.stop!
      problem = system.finish
      raise Failure, problem if problem

      i, a = result.stats("idle-workers"), result.stats("after-idle")
      puts "idle workers p50 #{Bench.ms(i&.p50)} ms, p99 #{Bench.ms(i&.p99)} ms; " \
           "after idleness p50 #{Bench.ms(a&.p50)} ms, max #{Bench.ms(a&.max)} ms"
      result
    rescue Failure, ProcessError, SolidJobs::Error, Redis::BaseError, SystemCallError => e
      workers&.stop # so its log is complete
      puts "ERROR"
      result.error = failure_text(e, workers)
      result
    ensure
      workers&.stop
      log&.close
      system.cleanup
    end

    # Enqueues one job and waits for it to start: [latency ms, enqueue call ms].
    def one_job(system, job, log, workers, pause: nil, timeout: START_TIMEOUT)
      stamp = StartLog.now_ns
      system.enqueue(job, stamp)
      enqueue_ms = (StartLog.now_ns - stamp) / 1_000_000.0
      start = log.wait_for(1, timeout: timeout, workers: workers).first
      raise Failure, "job stamped #{stamp} started, but the log names #{start.enqueued_ns}" unless start.enqueued_ns == stamp

      sleep pause if pause
      [start.latency_ms, enqueue_ms]
    end

    def settings_line
      format("Idle workers: %d jobs, one at a time, %.0f ms pause after each start; after idleness: %d jobs, each " \
             "after %.1f s idle; %d warm-up jobs per case; concurrency %s.",
             @jobs.fetch("idle-workers"), @pause * 1000, @jobs.fetch("after-idle"), @idle_seconds, @warmup,
             @concurrencies.join(", "))
    end

    def report
      rows = []
      csv = []
      @results.each do |r|
        PHASES.each do |phase, name|
          stats = r.ok? ? r.stats(phase) : nil
          enqueue = r.ok? ? r.stats(phase, 1)&.p50 : nil
          name = "after #{@idle_seconds} s idle" if phase == "after-idle"
          rows << [r.label, r.concurrency, name, stats ? stats.count : (r.ok? ? 0 : "error"),
                   *%i[p50 p95 p99 max].map { |f| Bench.ms(stats&.public_send(f)) }, Bench.ms(enqueue)]
          csv << [r.client, r.concurrency, phase, (@idle_seconds if phase == "after-idle"), stats&.count,
                  *%i[p50 p95 p99 max mean].map { |f| stats&.public_send(f)&.round(4) }, enqueue&.round(4),
                  r.error&.lines&.first&.strip]
        end
      end
      table = Bench.table(["System", "Concurrency", "Phase", "Jobs", "p50", "p95", "p99", "max", "enqueue call p50"], rows)
      errors = @results.reject(&:ok?).map { |r| "- #{r.label} c=#{r.concurrency}: #{r.error.lines.first.strip}" }
      body = with_errors(["Enqueue→start latency, ms:", "", table, "", "Targets:", *target_lines.map { |l| "- #{l}" }], errors)
      publish("latency", title: "Enqueue→start latency: SolidJobs vs Sidekiq", body: body, csv: Bench.csv(CSV_HEADER, csv),
                         intro: "#{settings_line} #{METHOD} Run at #{run_time}; " \
                                "generated by `bundle exec rake benchmark:latency`.")
    end

    METHOD = "Each system runs as its own CLI process (SolidJobs: `solid-jobs`, Ractor workers; Sidekiq: `sidekiq`, " \
             "BRPOP fetch) against a private redis-server without persistence, or a fresh memory-durability " \
             "`solid-engine-server` on a Unix socket. The producer reads CLOCK_MONOTONIC right before `Task.enqueue` / " \
             "`Sidekiq::Client.push`; the job reads it first thing in `execute_task` / `perform` and appends both to a " \
             "file (StartLog in benchmark/jobs.rb). Percentiles are nearest-rank. \"enqueue call\" is how long the " \
             "enqueue call took in the producer; the job can start before it returns."

    # "PASS ...", "MISS ..." or "n/a ..." for each SolidJobs client.
    def target_lines
      @concurrencies.flat_map do |c|
        @results.select { |r| r.concurrency == c && Bench.system(r.client).family == :solid }.flat_map do |r|
          idle, after = %w[idle-workers after-idle].map { |phase| r.ok? ? r.stats(phase)&.p50 : nil }
          [idle_line(r, idle), after_idle_line(r, idle, after)]
        end
      end
    end

    def idle_line(result, p50)
      what = "#{result.label}, idle workers, c=#{result.concurrency}: p50"
      return "n/a   #{what} (not measured)" unless p50

      sidekiq_result = @results.find { |r| r.client == "sidekiq" && r.concurrency == result.concurrency && r.ok? }
      sidekiq = sidekiq_result&.stats("idle-workers")&.p50
      note = sidekiq ? format("; Sidekiq %.3f ms, ratio %.2fx", sidekiq, p50 / sidekiq) : ""
      format("%-5s %s = %.3f ms (target < %.1f ms%s)", p50 < IDLE_P50_TARGET_MS ? "PASS" : "MISS", what, p50,
             IDLE_P50_TARGET_MS, note)
    end

    def after_idle_line(result, idle, after)
      what = "#{result.label}, after #{@idle_seconds} s idle, c=#{result.concurrency}: p50"
      return "n/a   #{what} (not measured)" unless idle && after

      format("%-5s %s = %.3f ms vs %.3f ms with idle workers (%+.3f ms; no polling delay means within +%.1f ms)",
             after - idle <= AFTER_IDLE_TOLERANCE_MS ? "PASS" : "MISS", what, after, idle, after - idle, AFTER_IDLE_TOLERANCE_MS)
    end
  end
end

exit Bench::Latency.main if $PROGRAM_NAME == __FILE__
