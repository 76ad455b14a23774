# frozen_string_literal: true

module SolidJobs
  class Web
    module Pages
      # The recurring schedules of the dashboard's configuration, as
      # `solid-jobs recurring` lists them: next run, last tick (enqueued or
      # skipped as missed) and last job; then state Redis still holds for
      # schedules no longer configured, with when it expires by itself.
      class Recurring < Page
        TITLE = "Recurring"
        FIELDS = %i[name schedule task channel missed next_ms last_tick_ms last_outcome last_job_id
                    last_job_tick_ms enqueued_ms expires_ms configured].freeze

        def body
          rows = snapshot.recurring
          return [unavailable_note(rows)] if unavailable?(rows)

          configured, left = rows.partition { |r| r[:configured] }
          [section("Schedules", table(
            [["Name"], ["Schedule"], ["Task"], ["Channel"], ["Missed ticks"], ["Next run"], ["Last tick"], ["Last job"]],
            configured.map do |r|
              [tag(:code, r[:name]), r[:schedule], r[:task], r[:channel], r[:missed].to_s, time(r[:next_ms]),
               last(r), r[:last_job_id] ? job_link(r[:last_job_id]) : "—"]
            end,
            empty: "No recurring schedules in this configuration (config.recurring, or task_options recurring: on a task)."
          )), left.empty? ? nil : leftovers(left)]
        end

        def to_h
          rows = snapshot.recurring
          {"page" => "recurring", "now_ms" => now_ms,
           "schedules" => unavailable?(rows) ? json_value(rows) : rows.map { |r| r.slice(*FIELDS).transform_keys(&:to_s) }}
        end

        private

        def time(ms) = ms ? Format.time(ms) : "—"

        def last(r)
          return "—" unless r[:last_tick_ms]

          [Format.time(r[:last_tick_ms]), " (", r[:last_outcome].to_s, ")"]
        end

        def leftovers(rows)
          section("No longer configured", tag(:p, "State of schedules removed from the configuration: it keeps their " \
                                                  "last tick so a node still running the old configuration cannot enqueue " \
                                                  "it again, and expires by itself.", class: "note"),
                  table([["Name"], ["Last tick"], ["Last job"], ["Expires"]],
                        rows.map do |r|
                          [tag(:code, r[:name]), last(r), r[:last_job_id] ? tag(:code, Format.short_id(r[:last_job_id])) : "—",
                           time(r[:expires_ms])]
                        end, empty: ""))
        end
      end
    end
  end
end
