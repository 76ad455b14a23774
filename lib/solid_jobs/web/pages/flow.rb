# frozen_string_literal: true

module SolidJobs
  class Web
    module Pages
      # Flow control (docs/flow-control.md): each concurrency key in use,
      # its slots held (claims of its jobs, prefetched ones included) and
      # its jobs waiting over the limit. Read-only.
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
            ))
          ]
        end

        def to_h
          keys = snapshot.concurrency_keys
          {"page" => "flow", "now_ms" => now_ms, "concurrency" => unavailable?(keys) ? json_value(keys) : keys}
        end

        private

        # The label (the key as the task's `key:` returned it) when a
        # blocked job names it, else the key's hash.
        def key_cell(k)
          k["label"] ? [tag(:code, k["label"]), " ", tag(:span, Format.short_id(k["key"]), class: "muted")] : tag(:code, k["key"])
        end
      end
    end
  end
end
