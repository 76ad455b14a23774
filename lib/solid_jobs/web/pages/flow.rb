# frozen_string_literal: true

module SolidJobs
  class Web
    module Pages
      # Flow control (docs/flow-control.md): each concurrency key in use,
      # its slots held (claims of its jobs, prefetched ones included) and
      # its jobs waiting over the limit; each rate key, its admissions in
      # the window, its throttled jobs and their next wake. Read-only.
      class Flow < Page
        TITLE = "Flow"

        def body
          keys = snapshot.concurrency_keys
          return [unavailable_note(keys)] if unavailable?(keys)

          [
            tiles([["Concurrency keys", Format.count(keys.size)],
                   ["Slots held", Format.count(keys.sum { |k| k["held"] })],
                   ["Blocked jobs", Format.count(keys.sum { |k| k["blocked"] })]]),
            section("Concurrency limits", table(
              [["Key"], ["Task"], ["Held", "num"], ["Limit", "num"], ["Blocked", "num"]],
              keys.map do |k|
                [key_cell(k), k["task"] || "—", Format.count(k["held"]), k["limit"] ? Format.count(k["limit"]) : "—",
                 Format.count(k["blocked"])]
              end,
              empty: "No concurrency limited job is claimed or waiting (task_options concurrency:)."
            )),
            rate_section
          ]
        end

        def to_h
          keys = snapshot.concurrency_keys
          rates = snapshot.rate_keys
          {"page" => "flow", "now_ms" => now_ms, "concurrency" => unavailable?(keys) ? json_value(keys) : keys,
           "rate" => unavailable?(rates) ? json_value(rates) : rates}
        end

        private

        # >>> rate limits (decision 42)
        def rate_section
          rates = snapshot.rate_keys
          return unavailable_note(rates) if unavailable?(rates)

          section("Rate limits", table(
            [["Key"], ["Task"], ["In window", "num"], ["Limit", "num"], ["Throttled", "num"], ["Next wake"]],
            rates.map do |k|
              wake = k["wake_ms"] ? "in #{Format.count([(k["wake_ms"] - now_ms) / 1000.0, 0].max.ceil)} s" : "—"
              [key_cell(k), k["task"] || "—", Format.count(k["logged"]), k["limit"] ? Format.count(k["limit"]) : "—",
               Format.count(k["throttled"]), wake]
            end,
            empty: "No rate limited job was admitted in its window or is waiting (task_options rate:)."
          ))
        end
        # <<< rate limits

        # The label (the key as the task's `key:` returned it) when a
        # blocked job names it, else the key's hash.
        def key_cell(k)
          k["label"] ? [tag(:code, k["label"]), " ", tag(:span, Format.short_id(k["key"]), class: "muted")] : tag(:code, k["key"])
        end
      end
    end
  end
end
