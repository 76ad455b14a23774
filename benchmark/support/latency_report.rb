# frozen_string_literal: true

require_relative "markdown"
require_relative "latency_stats"

module Bench
  # One job of benchmark/latency.rb: enqueue→start, and how long the
  # enqueue call itself took (its share of the latency; the rest is the
  # worker picking the job up).
  LatencyMeasurement = Struct.new(:latency_ms, :enqueue_ms)

  # One system at one concurrency: measurements per phase (:idle_workers,
  # :after_idle), or the error that stopped the case.
  LatencyResult = Struct.new(:system, :label, :concurrency, :phases, :error, keyword_init: true) do
    def ok? = error.nil?
    def stats(phase) = LatencyStats.of(measurements(phase).map(&:latency_ms))
    def enqueue_stats(phase) = LatencyStats.of(measurements(phase).map(&:enqueue_ms))
    def measurements(phase) = (phases || {}).fetch(phase, [])

    def summary
      i, a = stats(:idle_workers), stats(:after_idle)
      "idle workers p50 #{LatencyStats.ms(i&.p50)} ms, p99 #{LatencyStats.ms(i&.p99)} ms; " \
        "after idleness p50 #{LatencyStats.ms(a&.p50)} ms, max #{LatencyStats.ms(a&.max)} ms"
    end
  end

  # The latency table, CSV rows and target checks of benchmark/latency.rb.
  class LatencyReport
    PHASES = %i[idle_workers after_idle].freeze
    # Target for SolidJobs with idle workers (Sidekiq measured about 1.4 ms
    # on the 2-core development VM).
    IDLE_P50_TARGET_MS = 0.7
    # "No polling delay after idleness": the after-idleness p50 is within
    # this much of the idle-worker p50. A worker that fell back to polling
    # every P ms would add about P/2 to the median, so even a 5 ms poll
    # shows; 1 ms leaves room for the colder caches of a process that slept.
    AFTER_IDLE_TOLERANCE_MS = 1.0
    SOLID_SYSTEMS = %i[redis engine].freeze
    # phase: idle_workers, or after_idle (each job after idle_s of idleness).
    CSV_HEADER = %w[system concurrency phase idle_s jobs p50_ms p95_ms p99_ms max_ms mean_ms enqueue_call_p50_ms
                    error].freeze

    def initialize(results, idle_seconds:)
      @results = results
      @idle_seconds = idle_seconds
    end

    def table
      rows = rows_by_phase.map do |r, phase, stats|
        [r.label, r.concurrency, phase_label(phase), stats ? stats.count : (r.ok? ? 0 : "error"),
         *%i[p50 p95 p99 max].map { |f| LatencyStats.ms(stats&.public_send(f)) },
         LatencyStats.ms(r.ok? ? r.enqueue_stats(phase)&.p50 : nil)]
      end
      Markdown.table(["System", "Concurrency", "Phase", "Jobs", "p50", "p95", "p99", "max", "enqueue call p50"], rows)
    end

    def csv_header = CSV_HEADER

    def csv_rows
      rows_by_phase.map do |r, phase, stats|
        [r.system, r.concurrency, phase, (@idle_seconds if phase == :after_idle), stats&.count,
         *%i[p50 p95 p99 max mean].map { |f| stats&.public_send(f)&.round(4) },
         (r.enqueue_stats(phase)&.p50&.round(4) if r.ok?), r.error&.lines&.first&.strip]
      end
    end

    # "PASS ...", "MISS ..." or "n/a ..." (a case that failed or was not
    # run is not a miss).
    def target_lines
      concurrencies.flat_map do |c|
        SOLID_SYSTEMS.flat_map { |system| [idle_line(system, c), after_idle_line(system, c)] }.compact
      end
    end

    def error_lines
      @results.reject(&:ok?).map { |r| "- #{r.label} c=#{r.concurrency}: #{r.error.lines.first.strip}" }
    end

    private

    def concurrencies = @results.map(&:concurrency).uniq.sort
    def find(system, concurrency) = @results.find { |r| r.system == system && r.concurrency == concurrency }
    def phase_after = "after #{@idle_seconds} s idle"
    def phase_label(phase) = phase == :idle_workers ? "idle workers" : phase_after

    # [result, phase, stats or nil] for each result and phase.
    def rows_by_phase
      @results.flat_map { |r| PHASES.map { |phase| [r, phase, r.ok? ? r.stats(phase) : nil] } }
    end

    def p50(result, phase) = result&.ok? ? result.stats(phase)&.p50 : nil

    def idle_line(system, concurrency)
      result = find(system, concurrency)
      return nil unless result

      what = "#{result.label}, idle workers, c=#{concurrency}: p50"
      p50 = p50(result, :idle_workers)
      return "n/a   #{what} (not measured)" unless p50

      status = p50 < IDLE_P50_TARGET_MS ? "PASS" : "MISS"
      format("%-5s %s = %.3f ms (target < %.1f ms%s)", status, what, p50, IDLE_P50_TARGET_MS, sidekiq_note(p50, concurrency))
    end

    def sidekiq_note(p50, concurrency)
      reference = p50(find(:sidekiq, concurrency), :idle_workers)
      reference ? format("; Sidekiq %.3f ms, ratio %.2fx", reference, p50 / reference) : ""
    end

    def after_idle_line(system, concurrency)
      result = find(system, concurrency)
      return nil unless result

      what = "#{result.label}, #{phase_after}, c=#{concurrency}: p50"
      idle, after = p50(result, :idle_workers), p50(result, :after_idle)
      return "n/a   #{what} (not measured)" unless idle && after

      status = after - idle <= AFTER_IDLE_TOLERANCE_MS ? "PASS" : "MISS"
      format("%-5s %s = %.3f ms vs %.3f ms with idle workers (%+.3f ms; no polling delay means within +%.1f ms)",
             status, what, after, idle, after - idle, AFTER_IDLE_TOLERANCE_MS)
    end
  end
end
