# frozen_string_literal: true

require_relative "markdown"
require_relative "proc_facts"

module Bench
  # One idle worker measured over a window of `seconds`: CPU time its
  # process used, from /proc/<pid>/stat (`cpu_seconds`) and from the
  # scheduler's runtime (`scheduler_cpu_seconds`, nil where unavailable);
  # `commands`, the Redis calls in the window ({name => calls}, INFO
  # commandstats); and for SolidJobs `heartbeat`, {name => calls} of those
  # that were its heartbeat (nil when not attributed).
  IdleResult = Struct.new(:system, :concurrency, :seconds, :cpu_seconds, :scheduler_cpu_seconds, :commands, :heartbeat,
                          :error, keyword_init: true) do
    def ok? = error.nil?
    def cpu_percent = 100.0 * cpu_seconds / seconds
    def scheduler_cpu_percent = scheduler_cpu_seconds && 100.0 * scheduler_cpu_seconds / seconds
    def total_commands = commands.values.sum
    def commands_per_second = total_commands / seconds
    def heartbeat_total = heartbeat&.values&.sum

    # Calls of `name` not explained by the heartbeat (all of them when
    # nothing was attributed). Counted from commandstats, so a command
    # MONITOR did not show still counts here.
    def beyond_heartbeat(name) = [commands.fetch(name, 0) - (heartbeat&.fetch(name, 0) || 0), 0].max
    def beyond_heartbeat_total = commands.keys.sum { |name| beyond_heartbeat(name) }
  end

  # Tables, target checks and CSV rows of benchmark/idle.rb.
  class IdleReport
    LABELS = {sidekiq: "Sidekiq", solid_jobs: "SolidJobs"}.freeze
    CSV_HEADER = %w[system row command calls per_second heartbeat_calls concurrency window_seconds cpu_seconds cpu_percent
                    scheduler_cpu_seconds scheduler_cpu_percent error].freeze

    def initialize(results)
      @results = results
    end

    def summary_table
      rows = @results.map do |r|
        next [LABELS.fetch(r.system), r.concurrency, "error", "", "", "", "", ""] unless r.ok?

        [LABELS.fetch(r.system), r.concurrency, format("%.1f", r.seconds), format("%.2f", r.cpu_percent),
         percent(r.scheduler_cpu_percent), r.total_commands, format("%.2f", r.commands_per_second), split_of(r)]
      end
      Markdown.table(["System", "Concurrency", "Idle window s", "Worker CPU % (/proc stat)", "Worker CPU % (scheduler)",
                      "Redis cmds", "Redis cmds/s", "Of which"], rows)
    end

    def command_table
      rows = @results.select(&:ok?).flat_map do |r|
        r.commands.sort_by { |name, calls| [-calls, name] }.map do |name, calls|
          [LABELS.fetch(r.system), name, calls, format("%.2f", calls / r.seconds), attribution(r, name)]
        end
      end
      Markdown.table(["System", "Command", "Calls", "Calls/s", "Counted as"], rows)
    end

    # "PASS ..." / "MISS ..."; "n/a" when a case could not be measured.
    def target_lines
      solid, sidekiq = find(:solid_jobs), find(:sidekiq)
      [cpu_line(solid, sidekiq), commands_line(solid)]
    end

    def error_lines
      @results.reject(&:ok?).map { |r| "- #{LABELS.fetch(r.system)}: #{r.error}" }
    end

    def csv_header = CSV_HEADER

    def csv_rows
      @results.flat_map do |r|
        next [[r.system, "summary", nil, nil, nil, nil, r.concurrency, nil, nil, nil, nil, nil, r.error]] unless r.ok?

        summary = [r.system, "summary", "ALL", r.total_commands, r.commands_per_second.round(3), r.heartbeat_total,
                   r.concurrency, r.seconds.round(3), r.cpu_seconds.round(3), r.cpu_percent.round(3),
                   r.scheduler_cpu_seconds&.round(6), r.scheduler_cpu_percent&.round(4), nil]
        per_command = r.commands.sort.map do |name, calls|
          [r.system, "command", name, calls, (calls / r.seconds).round(3), r.heartbeat&.fetch(name, 0), r.concurrency,
           r.seconds.round(3), nil, nil, nil, nil, nil]
        end
        [summary, *per_command]
      end
    end

    private

    def find(system) = @results.find { |r| r.system == system }
    def percent(value) = value ? format("%.3f", value) : "n/a"

    def split_of(result)
      return "-" unless result.system == :solid_jobs
      return "not attributed" unless result.heartbeat

      "#{result.heartbeat_total} heartbeat, #{result.beyond_heartbeat_total} other"
    end

    def attribution(result, name)
      return "-" unless result.heartbeat

      beyond = result.beyond_heartbeat(name)
      return "heartbeat" if beyond.zero?
      return "beyond heartbeat" if beyond == result.commands.fetch(name)

      "heartbeat #{result.commands.fetch(name) - beyond}, beyond #{beyond}"
    end

    def cpu_line(solid, sidekiq)
      what = "idle worker CPU: SolidJobs <= Sidekiq"
      return "n/a   #{what} (needs both measured)" unless solid&.ok? && sidekiq&.ok?

      status = solid.cpu_percent <= sidekiq.cpu_percent ? "PASS" : "MISS"
      line = format("%-5s %s: %.2f%% vs %.2f%% of one core (/proc stat)", status, what, solid.cpu_percent, sidekiq.cpu_percent)
      line += " (#{precision_note(solid, sidekiq)})" if (solid.cpu_seconds - sidekiq.cpu_seconds).abs <= ProcFacts::RESOLUTION
      if solid.scheduler_cpu_percent && sidekiq.scheduler_cpu_percent
        line += format("; scheduler runtime %.3f%% vs %.3f%%", solid.scheduler_cpu_percent, sidekiq.scheduler_cpu_percent)
      end
      line
    end

    # /proc stat counts clock ticks: a difference of at most one tick over
    # the window says nothing about which worker is cheaper.
    def precision_note(solid, sidekiq)
      equal = solid.cpu_seconds == sidekiq.cpu_seconds ? "equal" : "differ by one clock tick"
      format("#{equal}: /proc stat resolves %.0f ms, %.2f%% of this window", ProcFacts::RESOLUTION * 1000,
             100.0 * ProcFacts::RESOLUTION / solid.seconds)
    end

    def commands_line(solid)
      what = "SolidJobs idle Redis commands beyond the heartbeat"
      return "n/a   #{what} (not measured)" unless solid&.ok?
      return "n/a   #{what} (heartbeat not attributed: MONITOR failed)" unless solid.heartbeat

      beyond = solid.beyond_heartbeat_total
      format("%-5s %s = %d (target 0); heartbeat ticks: %d EVALSHA + %d more (run by the script, or the telemetry " \
             "flush pipelined with it) = %.2f cmds/s",
             beyond.zero? ? "PASS" : "MISS", what, beyond, solid.heartbeat.fetch("evalsha", 0),
             solid.heartbeat_total - solid.heartbeat.fetch("evalsha", 0), solid.heartbeat_total / solid.seconds)
    end
  end
end
