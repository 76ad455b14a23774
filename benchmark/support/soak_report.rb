# frozen_string_literal: true

require_relative "markdown"
require_relative "trend"

module Bench
  # One sample of a soak: gauges at `elapsed` seconds, latencies of the jobs
  # that started since the previous sample.
  SoakSample = Struct.new(:elapsed, :enqueued, :done, :backlog, :started, :p50, :p99, :rss_mb, :pss_mb, :backend_mb,
                          keyword_init: true)

  # A soak against one backend: its samples and the final job accounting
  # (read after the worker stopped, so the counters are complete).
  SoakRun = Struct.new(:backend, :label, :memory_label, :samples, :enqueued, :done, :failed, :started, :duplicates,
                       :error, keyword_init: true) do
    def ok? = error.nil?
    def lost = enqueued - started
  end

  # The tables, trends and verdicts of benchmark/soak.rb.
  #
  # Memory bound. A gauge FAILS when, after the warm-up, it keeps growing:
  # its least-squares slope over the second half of the run exceeds
  # `slope` MB/h AND it grew by more than `growth` MB from the end of the
  # warm-up to the end (medians of up to three samples at each end, so one
  # spike decides nothing). Both conditions, because:
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
  class SoakReport
    Bound = Struct.new(:slope, :growth)
    BOUNDS = {rss_mb: Bound.new(16, 4), pss_mb: Bound.new(16, 4), redis: Bound.new(8, 2), engine: Bound.new(16, 4)}.freeze
    # The first fifth of the run (at least one interval) is warm-up: boot,
    # heap growth to the working set, the engine's one-minute retention of
    # completed jobs filling up. It is left out of every trend.
    WARMUP_FRACTION = 0.2
    # Fewer samples than this in the second half, or a shorter run, and the
    # memory trend is reported but not judged (a smoke run).
    MIN_JUDGED_SAMPLES = 5
    MIN_JUDGED_SECONDS = 120
    CSV_HEADER = %w[backend elapsed_s enqueued done backlog started_in_interval p50_ms p99_ms worker_rss_mb
                    worker_pss_mb backend_memory_mb backend_memory_kind].freeze

    def initialize(runs, seconds:, interval:)
      @runs = runs
      @seconds = seconds
      @interval = interval
    end

    def warmup_seconds = [@seconds * WARMUP_FRACTION, @interval].max

    def samples_table(run)
      rows = run.samples.map do |s|
        [s.elapsed.round, s.enqueued, s.done, s.backlog, s.started, ms(s.p50), ms(s.p99), mb(s.rss_mb), mb(s.pss_mb),
         mb(s.backend_mb)]
      end
      Markdown.table(["t (s)", "Enqueued", "Done", "Backlog", "Started", "p50 ms", "p99 ms", "Worker RSS MB",
                      "Worker PSS MB", run.memory_label], rows)
    end

    def trend_table(run)
      rows = gauges(run).map do |name, field, unit|
        trend = trend(run, field)
        [name, per_hour(trend[:slope], unit), per_hour(trend[:late_slope], unit), signed(trend[:growth], unit)]
      end
      Markdown.table(["Gauge", "Slope after warm-up", "Slope, 2nd half", "Change after warm-up"], rows)
    end

    # "PASS ...", "FAIL ..." or "n/a ..." lines for one run.
    def verdict_lines(run)
      return ["FAIL  #{run.label}: #{run.error.lines.first.strip}"] unless run.ok?

      [jobs_line(run), *memory_gauges(run).map { |name, field, bound| memory_line(run, name, field, bound) }, backlog_line(run)].compact
    end

    def passed?(run) = verdict_lines(run).none? { |l| l.start_with?("FAIL") }

    def csv_header = CSV_HEADER

    def csv_rows
      @runs.flat_map do |run|
        run.samples.map do |s|
          [run.backend, s.elapsed.round(1), s.enqueued, s.done, s.backlog, s.started, s.p50&.round(4), s.p99&.round(4),
           s.rss_mb&.round(2), s.pss_mb&.round(2), s.backend_mb&.round(2), run.memory_label]
        end
      end
    end

    private

    def gauges(run)
      [["Worker RSS", :rss_mb, "MB"], ["Worker PSS", :pss_mb, "MB"], [run.memory_label.delete_suffix(" MB"), :backend_mb, "MB"],
       ["p50 latency", :p50, "ms"], ["p99 latency", :p99, "ms"]]
    end

    def memory_gauges(run)
      [["worker RSS", :rss_mb, BOUNDS[:rss_mb]], ["worker PSS", :pss_mb, BOUNDS[:pss_mb]],
       [run.memory_label.delete_suffix(" MB"), :backend_mb, BOUNDS.fetch(run.backend)]]
    end

    # Slope after the warm-up, slope over the second half, and the change
    # from the end of the warm-up to the end of the run.
    def trend(run, field)
      after = points(run.samples.select { |s| s.elapsed > warmup_seconds }, field)
      late = points(run.samples.select { |s| s.elapsed >= @seconds / 2.0 }, field)
      {slope: Trend.slope_per_hour(*after.transpose), late_slope: Trend.slope_per_hour(*late.transpose),
       growth: growth(after.map(&:last)), late_count: late.size}
    end

    def points(samples, field) = samples.filter_map { |s| (v = s.public_send(field)) && [s.elapsed, v] }

    def growth(values)
      return nil if values.size < 2

      ends = [values.size / 2, 3].min.clamp(1, 3)
      median(values.last(ends)) - median(values.first(ends))
    end

    def median(values) = values.sort[values.size / 2]

    def memory_line(run, name, field, bound)
      t = trend(run, field)
      figures = "slope over the 2nd half #{per_hour(t[:late_slope], "MB")}, change after warm-up #{signed(t[:growth], "MB")}"
      rule = "(fails when > #{bound.slope} MB/h and > #{bound.growth} MB)"
      if t[:late_count] < MIN_JUDGED_SAMPLES || @seconds < MIN_JUDGED_SECONDS || t[:late_slope].nil? || t[:growth].nil?
        return "n/a   #{run.label} #{name}: #{figures}; too short to judge (needs >= #{MIN_JUDGED_SECONDS} s and " \
               ">= #{MIN_JUDGED_SAMPLES} samples in the 2nd half)"
      end

      status = t[:late_slope] > bound.slope && t[:growth] > bound.growth ? "FAIL" : "PASS"
      "#{status.ljust(5)} #{run.label} #{name}: #{figures} #{rule}"
    end

    def jobs_line(run)
      figures = "#{run.enqueued} enqueued, #{run.done} done, #{run.started} started, #{run.failed} failed, " \
                "#{run.lost} lost (never started), #{run.duplicates} started twice"
      clean = run.lost.zero? && run.failed.zero? && run.duplicates.zero? && run.done == run.enqueued
      "#{clean ? "PASS " : "FAIL "} #{run.label} jobs: #{figures}"
    end

    # Not a failure (a slow shared host can fall behind), but it explains a
    # rising latency or backend memory.
    def backlog_line(run)
      last = run.samples.last
      return nil unless last && last.backlog > [last.enqueued / [last.elapsed, 1].max, 100].max

      "WARN  #{run.label}: #{last.backlog} jobs waiting at the last sample; the worker did not keep up with the rate"
    end

    def ms(value) = value ? format("%.3f", value) : "n/a"
    def mb(value) = value ? format("%.1f", value) : "n/a"
    def per_hour(value, unit) = value ? format("%+.2f %s/h", value, unit) : "n/a"
    def signed(value, unit) = value ? format("%+.2f %s", value, unit) : "n/a"
  end
end
