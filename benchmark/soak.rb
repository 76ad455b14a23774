# frozen_string_literal: true

# Soak: steady load on one solid-jobs worker process for a long time, to see
# whether memory or latency drift.
#
#   BENCH_SECONDS=600 bundle exec rake benchmark:soak
#   BENCH_SMOKE=1 bundle exec rake benchmark:soak   # 6 s, for tests
#
# Environment (defaults in parentheses):
#   BENCH_SECONDS      load duration per client (600)
#   BENCH_RATE         jobs enqueued per second (500)
#   BENCH_INTERVAL     seconds between samples (10)
#   BENCH_CONCURRENCY  worker concurrency, a list: one soak each (2)
#   BENCH_CLIENTS      solid-jobs and/or solid-jobs-engine (solid-jobs)
#   BENCH_SMOKE=1      6 s at 200 jobs/s, 1 s interval
#   BENCH_OUTPUT_DIR   where soak.{md,csv} go (benchmark/results; nowhere in a smoke run)
#
# One producer (this process) enqueues at the fixed rate, one job at a time
# through Task.enqueue, on schedule (after a stall it catches up, so the
# average rate holds). The mix: 8 in 10 empty jobs, 1 with a short CPU
# burst, 1 with nested arguments. Every interval it samples the worker's
# RSS and PSS (/proc), the backend's memory (Redis used_memory, or the
# engine server's RSS), the backlog, the jobs done, and the enqueue→start
# latency of the jobs that started in the interval (StartLog in
# benchmark/jobs.rb). After the load it waits for the backlog to drain,
# stops the worker and checks every job ran exactly once and none failed.
#
# Exit status: non-zero when jobs were lost, failed or ran twice, when a
# memory gauge kept growing past its bound (see BOUNDS), or when the soak
# could not run.

require_relative "support/systems"
require "sidekiq" # only for the version in the shared results header
require_relative "jobs"

module Bench
  # Memory bound. A gauge FAILS when, after the warm-up, it keeps growing:
  # its least-squares slope over the second half of the run exceeds `slope`
  # MB/h AND it grew by more than `growth` MB from the end of the warm-up to
  # the end (medians of up to three samples at each end, so one spike
  # decides nothing). Both conditions, because:
  #   * slope alone misfires on short runs: a Ruby heap that grows one step
  #     of 1-2 MB (a new GC heap page block, a malloc arena) in the last
  #     minutes of a 10-minute run is a steep but harmless slope;
  #   * growth alone misses slow leaks in long runs and flags growth that
  #     stopped (a cache filling up once).
  # Worker RSS: 16 MB/h is about 9 bytes per job at 500 jobs/s (1.8 M jobs
  # per hour); a worker leaking that would need a restart about daily. 4 MB
  # is above the step noise of a Ruby process's RSS. With the defaults (600
  # s, warm-up 120 s), the growth condition is the binding one: a 600 s run
  # catches leaks from about 30 MB/h (17 bytes/job at 500 jobs/s); a longer
  # run is needed to see slower ones. Redis used_memory has no allocator
  # noise, and anything a job leaves behind in Redis is at least tens of
  # bytes, so its bound is tighter.
  class Soak < Harness
    Bound = Struct.new(:slope, :growth)
    BOUNDS = {rss_mb: Bound.new(16, 4), pss_mb: Bound.new(16, 4), "solid-jobs" => Bound.new(8, 2),
              "solid-jobs-engine" => Bound.new(16, 4)}.freeze
    # The first fifth of the run (at least one interval) is warm-up: boot,
    # heap growth to the working set, the engine's one-minute retention of
    # completed jobs filling up. It is left out of every trend.
    WARMUP_FRACTION = 0.2
    # Fewer samples than this in the second half, or a shorter run, and the
    # memory trend is reported but not judged (a smoke run).
    MIN_JUDGED_SAMPLES = 5
    MIN_JUDGED_SECONDS = 120
    BOOT_TIMEOUT = 60
    # After the load: time for the backlog to drain and the last
    # completions to be written.
    DRAIN_TIMEOUT = 60
    CPU_ITERATIONS = 2000
    PAYLOAD_NOTE = ("x" * 64).freeze
    CSV_HEADER = %w[backend concurrency elapsed_s enqueued done backlog started_in_interval p50_ms p99_ms worker_rss_mb
                    worker_pss_mb backend_memory_mb backend_memory_kind].freeze

    # Gauges at `elapsed` seconds; latencies of the jobs started since the
    # previous sample.
    Sample = Struct.new(:elapsed, :enqueued, :done, :backlog, :started, :p50, :p99, :rss_mb, :pss_mb, :backend_mb,
                        keyword_init: true)

    # One soak: its samples and the final job accounting (read after the
    # worker stopped, so the counters are complete).
    Run = Struct.new(:client, :label, :concurrency, :memory_label, :samples, :enqueued, :done, :failed, :started, :duplicates,
                     :error, keyword_init: true) do
      def ok? = error.nil?
      def lost = enqueued - started
    end

    def initialize(settings)
      super
      @seconds = settings.integer("BENCH_SECONDS", @smoke ? 6 : 600)
      @rate = settings.integer("BENCH_RATE", @smoke ? 200 : 500)
      @interval = settings.integer("BENCH_INTERVAL", @smoke ? 1 : 10)
      @concurrencies = settings.integers("BENCH_CONCURRENCY", [2])
      @clients = settings.choices("BENCH_CLIENTS", %w[solid-jobs solid-jobs-engine], ["solid-jobs"])
      return if @seconds >= 2 * @interval

      raise Failure, "BENCH_SECONDS (#{@seconds}) must be at least twice BENCH_INTERVAL (#{@interval}), " \
                     "or there is no trend to draw"
    end

    private

    def measure
      puts settings_line
      runs = @clients.product(@concurrencies).map { |client, concurrency| soak(Bench.system(client), concurrency) }
      report(runs)
      runs.all? { |r| verdict_lines(r).none? { |l| l.start_with?("FAIL") } }
    end

    def soak(system, concurrency)
      run = Run.new(client: system.name, label: "#{system.label}, c=#{concurrency}", concurrency: concurrency, samples: [],
                    enqueued: 0, done: 0, failed: 0, started: 0, duplicates: 0)
      puts "", "#{run.label}, #{@seconds} s at #{@rate} jobs/s:"
      system.prepare(@lab)
      run.memory_label = system.memory_label
      path = File.join(@lab.dir, "starts-#{system.name}-c#{concurrency}.log")
      @starts = StartLog::Reader.new(path)
      workers = system.start_workers(concurrency, env: {"BENCH_START_LOG" => path})
      # One job, waited for, so worker boot is not part of the first sample.
      enqueue(system, run)
      @starts.wait_for(1, timeout: BOOT_TIMEOUT, workers: workers)
      steady_load(system, run, workers)
      drain(system, run, workers)
      workers.stop!
      # Counters read after the worker stopped are complete.
      @starts.read_new
      run.done, run.failed = system.counts.values_at(:processed, :failed)
      run.started = @starts.started
      run.duplicates = @starts.duplicates
      problem = system.finish
      raise Failure, problem if problem

      run
    rescue Failure, ProcessError, SolidJobs::Error, Redis::BaseError, SystemCallError => e
      workers&.stop # so its log is complete
      run.error = failure_text(e, workers)
      run
    ensure
      workers&.stop
      @starts&.close
      system.cleanup
    end

    # Enqueues on schedule and samples every interval until the last sample.
    def steady_load(system, run, workers)
      started_at = Bench.now
      next_sample = started_at + @interval
      sent = 0
      until run.samples.size == @seconds / @interval
        now = Bench.now
        if now >= next_sample
          run.samples << sample(system, run, workers, now - started_at)
          print_sample(run.samples.last)
          next_sample += @interval
          next
        end
        due = started_at + sent.fdiv(@rate)
        if due > now
          sleep([due, next_sample].min - now)
          next
        end
        enqueue(system, run)
        sent += 1
      end
    end

    # The mix, by job number modulo 10.
    def enqueue(system, run)
      stamp = StartLog.now_ns
      case run.enqueued % 10
      when 8 then system.enqueue(SolidLatencyCpu, stamp, CPU_ITERATIONS)
      when 9 then system.enqueue(SolidLatencyPayload, stamp,
                                 {"n" => run.enqueued, "tags" => %w[soak mix payload], "note" => PAYLOAD_NOTE})
      else system.enqueue(SolidLatency, stamp)
      end
      run.enqueued += 1
    end

    def sample(system, run, workers, elapsed)
      raise Failure, "the worker exited (#{workers.exit_status.inspect}) during the soak" if workers.exited?

      stats = LatencyStats.of(@starts.read_new.map(&:latency_ms))
      pid = workers.pids.first
      Sample.new(elapsed: elapsed, enqueued: run.enqueued, done: system.counts[:processed], backlog: system.waiting,
                 started: stats&.count || 0, p50: stats&.p50, p99: stats&.p99, rss_mb: ProcFacts.rss_mb(pid),
                 pss_mb: ProcFacts.pss_mb(pid), backend_mb: system.memory_mb)
    end

    def print_sample(s)
      puts format("  t=%4ds enqueued %d done %d backlog %d | p50 %s ms p99 %s ms | worker RSS %s MB PSS %s MB | backend %s MB",
                  s.elapsed.round, s.enqueued, s.done, s.backlog, Bench.ms(s.p50), Bench.ms(s.p99), mb(s.rss_mb), mb(s.pss_mb),
                  mb(s.backend_mb))
    end

    # Waits until every enqueued job started and its completion was written;
    # the accounting after the stop reports what is missing.
    def drain(system, run, workers)
      deadline = Bench.now + DRAIN_TIMEOUT
      until (@starts.read_new && @starts.started >= run.enqueued) && system.counts[:processed] >= run.enqueued
        return warn("  drain: not every job finished within #{DRAIN_TIMEOUT}s") if Bench.now > deadline
        raise Failure, "the worker exited (#{workers.exit_status.inspect}) while draining" if workers.exited?

        sleep 0.05
      end
    end

    def settings_line
      "#{@seconds} s per client at #{@rate} jobs/s, sampled every #{@interval} s; " \
        "worker concurrency #{@concurrencies.join(", ")}; clients: #{@clients.join(", ")}."
    end

    def report(runs)
      sections = runs.map do |run|
        ["## #{run.label}", "", run.samples.empty? ? "(no samples)" : samples_table(run), "",
         "Trend after the #{warmup_seconds.round} s warm-up:", "", trend_table(run), "",
         *verdict_lines(run).map { |l| "- #{l}" }].join("\n")
      end
      csv = runs.flat_map do |run|
        run.samples.map do |s|
          [run.client, run.concurrency, s.elapsed.round(1), s.enqueued, s.done, s.backlog, s.started, s.p50&.round(4),
           s.p99&.round(4), s.rss_mb&.round(2), s.pss_mb&.round(2), s.backend_mb&.round(2), run.memory_label]
        end
      end
      publish("soak", title: "Soak: SolidJobs under steady load", body: sections.join("\n\n"), csv: Bench.csv(CSV_HEADER, csv),
                      intro: "#{settings_line} #{METHOD} Run at #{run_time}; generated by `bundle exec rake benchmark:soak`.")
    end

    METHOD = "One `solid-jobs` worker process (Ractor workers) against a private redis-server without persistence, or a " \
             "fresh memory-durability `solid-engine-server`. The producer enqueues one job at a time on a fixed schedule " \
             "(8 in 10 empty, 1 with a #{CPU_ITERATIONS}-iteration CPU burst, 1 with nested arguments). Latency is enqueue " \
             "call → `execute_task` entered (CLOCK_MONOTONIC, StartLog in benchmark/jobs.rb) of the jobs started in each " \
             "interval. Memory verdicts: see Bench::Soak in benchmark/soak.rb.".freeze

    def warmup_seconds = [@seconds * WARMUP_FRACTION, @interval].max

    def samples_table(run)
      rows = run.samples.map do |s|
        [s.elapsed.round, s.enqueued, s.done, s.backlog, s.started, Bench.ms(s.p50), Bench.ms(s.p99), mb(s.rss_mb), mb(s.pss_mb),
         mb(s.backend_mb)]
      end
      Bench.table(["t (s)", "Enqueued", "Done", "Backlog", "Started", "p50 ms", "p99 ms", "Worker RSS MB", "Worker PSS MB",
                   run.memory_label], rows)
    end

    def gauges(run) = [["Worker RSS", :rss_mb, "MB"], ["Worker PSS", :pss_mb, "MB"], [backend_name(run), :backend_mb, "MB"],
                       ["p50 latency", :p50, "ms"], ["p99 latency", :p99, "ms"]]

    def backend_name(run) = run.memory_label.delete_suffix(" MB")

    def trend_table(run)
      rows = gauges(run).map do |name, field, unit|
        t = trend(run, field)
        [name, per_hour(t[:slope], unit), per_hour(t[:late_slope], unit), signed(t[:growth], unit)]
      end
      Bench.table(["Gauge", "Slope after warm-up", "Slope, 2nd half", "Change after warm-up"], rows)
    end

    # "PASS ...", "FAIL ..." or "n/a ..." lines for one run.
    def verdict_lines(run)
      return ["FAIL  #{run.label}: #{run.error.lines.first.strip}"] unless run.ok?

      memory = [["worker RSS", :rss_mb, BOUNDS[:rss_mb]], ["worker PSS", :pss_mb, BOUNDS[:pss_mb]],
                [backend_name(run), :backend_mb, BOUNDS.fetch(run.client)]]
      [jobs_line(run), *memory.map { |name, field, bound| memory_line(run, name, field, bound) }, backlog_line(run)].compact
    end

    # Slope after the warm-up, slope over the second half, and the change
    # from the end of the warm-up to the end of the run.
    def trend(run, field)
      after = points(run.samples.select { |s| s.elapsed > warmup_seconds }, field)
      late = points(run.samples.select { |s| s.elapsed >= @seconds / 2.0 }, field)
      {slope: slope_per_hour(after), late_slope: slope_per_hour(late), growth: growth(after.map(&:last)), late_count: late.size}
    end

    def points(samples, field) = samples.filter_map { |s| (v = s.public_send(field)) && [s.elapsed, v] }

    # Least-squares line through (seconds, value) points, in units per
    # hour: how fast a gauge moves, robust to the noise of any one sample.
    def slope_per_hour(points)
      return nil if points.size < 2

      mean_t = points.sum(&:first) / points.size.to_f
      mean_v = points.sum(&:last) / points.size.to_f
      spread = points.sum { |t, _| (t - mean_t)**2 }
      spread.zero? ? nil : points.sum { |t, v| (t - mean_t) * (v - mean_v) } / spread * 3600
    end

    def growth(values)
      return nil if values.size < 2

      ends = [values.size / 2, 3].min.clamp(1, 3)
      values.last(ends).sort[ends / 2] - values.first(ends).sort[ends / 2]
    end

    def memory_line(run, name, field, bound)
      t = trend(run, field)
      figures = "slope over the 2nd half #{per_hour(t[:late_slope], "MB")}, change after warm-up #{signed(t[:growth], "MB")}"
      if t[:late_count] < MIN_JUDGED_SAMPLES || @seconds < MIN_JUDGED_SECONDS || t[:late_slope].nil? || t[:growth].nil?
        return "n/a   #{run.label} #{name}: #{figures}; too short to judge (needs >= #{MIN_JUDGED_SECONDS} s and " \
               ">= #{MIN_JUDGED_SAMPLES} samples in the 2nd half)"
      end

      status = t[:late_slope] > bound.slope && t[:growth] > bound.growth ? "FAIL" : "PASS"
      "#{status.ljust(5)} #{run.label} #{name}: #{figures} (fails when > #{bound.slope} MB/h and > #{bound.growth} MB)"
    end

    def jobs_line(run)
      clean = run.lost.zero? && run.failed.zero? && run.duplicates.zero? && run.done == run.enqueued
      "#{clean ? "PASS " : "FAIL "} #{run.label} jobs: #{run.enqueued} enqueued, #{run.done} done, #{run.started} started, " \
        "#{run.failed} failed, #{run.lost} lost (never started), #{run.duplicates} started twice"
    end

    # Not a failure (a slow shared host can fall behind), but it explains a
    # rising latency or backend memory.
    def backlog_line(run)
      last = run.samples.last
      return nil unless last && last.backlog > [last.enqueued / [last.elapsed, 1].max, 100].max

      "WARN  #{run.label}: #{last.backlog} jobs waiting at the last sample; the worker did not keep up with the rate"
    end

    def mb(value) = value ? format("%.1f", value) : "n/a"
    def per_hour(value, unit) = value ? format("%+.2f %s/h", value, unit) : "n/a"
    def signed(value, unit) = value ? format("%+.2f %s", value, unit) : "n/a"
  end
end

exit Bench::Soak.main if $PROGRAM_NAME == __FILE__
