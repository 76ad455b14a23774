# frozen_string_literal: true

require "json"
require "time"
require_relative "subcommand"

module SolidJobs
  # `solid-jobs recurring [--json] [options]`: the recurring schedules of
  # the app's configuration (config.recurring and tasks' `recurring:`
  # option), each with its next run, its last tick (enqueued or skipped)
  # and its last job id, as Redis records them; then state Redis still holds
  # for schedules no longer configured (it expires by itself). Exit 0, or
  # 1 when Redis does not answer, 64 on usage.
  class RecurringCommand < Subcommand
    BACKEND_DOWN = 1
    COMMAND = "solid-jobs recurring"
    BANNER = "Usage: solid-jobs recurring [--json] [options]\n\n" \
             "Lists the recurring schedules: next run, last run (tick) and last job id."
    FAILURES = {ConnectionError => BACKEND_DOWN, BackendError => BACKEND_DOWN}.freeze

    private

    def define_options(parser, options)
      parser.on("--json", "One JSON array of the schedules") { options[:json] = true }
    end

    def call(options)
      rows = Recurring.status
      options[:json] ? @out.puts(JSON.generate(rows.map(&:to_h))) : print_table(rows)
      0
    end

    def print_table(rows)
      if rows.empty?
        @out.puts("no recurring schedules (config.recurring, or task_options recurring: on a task)")
        return
      end
      header = %w[NAME SCHEDULE TASK CHANNEL NEXT LAST_TICK LAST_JOB]
      lines = rows.map do |r|
        last = r.last_tick_ms ? "#{time(r.last_tick_ms)} (#{r.last_outcome})" : "-"
        name = r.configured ? r.name : "#{r.name} (not configured; state expires #{time(r.expires_ms)})"
        [name, r.schedule || "-", r.task || "-", r.channel || "-", time(r.next_ms), last, r.last_job_id || "-"]
      end
      widths = header.each_index.map { |i| ([header] + lines).map { |l| l[i].to_s.size }.max }
      ([header] + lines).each { |l| @out.puts(l.each_with_index.map { |v, i| v.to_s.ljust(widths[i]) }.join("  ").rstrip) }
    end

    def time(ms) = ms ? Time.at(ms / 1000.0).utc.iso8601 : "-"
  end
end
