# frozen_string_literal: true

module SolidJobs
  class Web
    module Pages
      # Every channel: ready depth, how long its oldest ready job has
      # waited, whether it is paused (SolidJobs::Channels: since when, by
      # whom), which backend holds it, and which live nodes serve it. A
      # SolidEngine channel is read from its engine (Catalog#channels); an
      # engine that does not answer marks its channels unavailable.
      class Channels < Page
        TITLE = "Channels"

        def body
          channels = snapshot.channels
          return [unavailable_note(channels)] if unavailable?(channels)

          counts = snapshot.counts
          [
            tiles([["Channels", Format.count(channels.size)],
                   ["Ready", Format.count(channels.sum { |c| c["depth"].to_i })],
                   *%w[planned retrying archived].map { |k| [k.capitalize, count_or(counts[k])] },
                   ["Held publications", count_or(counts["publishing"])]]),
            BarList.new(title: "Ready jobs per channel", items: channels.map { |c| [c["name"], c["depth"]] }).to_html,
            section("Channels", table(
              [["Channel"], ["Backend"], ["Ready", "num"], ["Oldest ready job waiting", "num"], ["State"],
               ["Ready by priority"], ["Served by"]],
              channels.map do |c|
                [tag(:code, c["name"]), backend(c), depth(c), latency(c), state(c), levels(c), served_by(c["name"])]
              end,
              empty: "No channel has been written to yet."
            ))
          ]
        end

        def to_h
          channels = snapshot.channels
          {
            "page" => "channels", "now_ms" => now_ms,
            "channels" => unavailable?(channels) ? json_value(channels) : channels.map do |c|
              {"name" => c["name"], "backend" => c["backend"], "depth" => c["depth"], "latency_s" => c["latency_s"],
               "paused" => c["paused"], "levels" => c["levels"]&.transform_keys(&:to_s),
               "served_by" => servers[c["name"]], **c.slice("scheduled", "reserved", "dead", "unavailable")}
            end,
            "counts" => snapshot.counts.transform_values { |v| json_value(v) }
          }
        end

        private

        # Paused channels keep their jobs ready; no node claims from them
        # until `solid-jobs channel resume NAME` (or Channels.resume).
        def state(channel)
          paused = channel["paused"]
          return tag(:span, "claiming", class: "muted") unless paused

          by = paused["by"] ? " by #{paused["by"]}" : ""
          hint = "solid-jobs channel resume #{channel["name"]}"
          tag(:span, "paused since #{Format.time(paused["paused_ms"])}#{by}", class: "stale", title: hint)
        end

        # Ready jobs per priority level a channel has used (docs/flow-control.md,
        # "Priorities"): "1: 2 · 5: 3 · 8: 1", level 5 being the channel's own
        # list; "—" for a channel that never used a priority.
        def levels(channel)
          levels = channel["levels"] or return "—"

          base = channel["depth"].to_i - levels.values.sum
          levels.merge(5 => base).sort.map { |p, n| "#{p}: #{Format.count(n)}" }.join(" · ")
        end

        # A SolidEngine channel also shows what its engine holds besides
        # the ready jobs (scheduled, reserved, dead).
        def backend(channel)
          name = channel["backend"] or return "—"
          return tag(:code, name) unless channel.key?("channel_id")

          held = %w[scheduled reserved dead].filter_map { |k| "#{Format.count(channel[k])} #{k}" if channel[k] }
          detail = "SolidEngine ##{channel["channel_id"]}#{": #{held.join(", ")}" unless held.empty?}"
          [tag(:code, name), " ", tag(:span, detail, class: "muted")]
        end

        def depth(channel)
          return Format.unavailable(channel["unavailable"]) if channel["unavailable"]

          Format.count(channel["depth"])
        end

        def count_or(value) = unavailable?(value) ? Format.unavailable(value.reason) : Format.count(value)

        def latency(channel)
          return Format.unavailable(channel["unavailable"]) if channel["unavailable"]
          return "—" if channel["depth"].to_i.zero?

          Format.or_unavailable(channel["latency_s"]) { |s| Format.seconds(s) }
        end

        # channel => [node descriptions] from the nodes' observations; nil
        # when no observation is available.
        def servers
          @servers ||= begin
            nodes = snapshot.nodes
            if unavailable?(nodes)
              Hash.new(nil)
            else
              nodes.each_with_object(Hash.new { |hash, key| hash[key] = [] }) do |n, all|
                node = n["node"]
                next unless node.is_a?(Hash)

                Array(node["channels"]).each do |entry|
                  name = entry.is_a?(Array) ? entry.first : entry.to_s.split(",").first
                  all[name] << "#{node["hostname"]}:#{node["pid"]}"
                end
              end
            end
          end
        end

        def served_by(name)
          list = servers[name]
          return Format.unavailable("node observations unavailable") if list.nil?
          return tag(:span, "no live node", class: "muted") if list.empty?

          list.join(", ")
        end
      end
    end
  end
end
