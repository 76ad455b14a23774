# frozen_string_literal: true

module SolidJobs
  class Web
    module Pages
      # Redis as the dashboard sees it (PING round trip, INFO) and as each
      # node last saw it (its redis observation: connected or not, since
      # when).
      class RedisHealth < Page
        TITLE = "Redis"
        INFO_FIELDS = [
          ["Version", "redis_version"], ["Uptime", "uptime_in_seconds", :seconds],
          ["Connected clients", "connected_clients", :count], ["Memory used", "used_memory", :bytes],
          ["Peak memory", "used_memory_peak", :bytes], ["Max memory", "maxmemory", :max_memory],
          ["Commands / s", "instantaneous_ops_per_sec", :count], ["Rejected connections", "rejected_connections", :count],
          ["Evicted keys", "evicted_keys", :count], ["Role", "role"], ["Last save", "rdb_last_bgsave_status"],
          ["Append-only file", "aof_enabled", :on_off]
        ].freeze

        def body
          [section("From this dashboard", server), section("From each node", nodes)]
        end

        def to_h
          server = snapshot.redis_server
          nodes = snapshot.nodes
          {
            "page" => "redis", "now_ms" => now_ms,
            "dashboard" => if unavailable?(server)
                             json_value(server)
                           else
                             {"rtt_ms" => server["rtt_ms"], "info" => server["info"].slice(*INFO_FIELDS.map { |f| f[1] })}
                           end,
            "nodes" => if unavailable?(nodes)
                         json_value(nodes)
                       else
                         nodes.map { |n| {"node_id" => n["node_id"], "redis" => n["redis"]} }
                       end
          }
        end

        private

        def server
          s = snapshot.redis_server
          return facts([["Reachable", tag(:span, "no", class: "bad")], ["Error", s.reason]]) if unavailable?(s)

          info = s["info"]
          facts([["Reachable", tag(:span, "yes", class: "ok")], ["Round trip (PING)", Format.ms(s["rtt_ms"])]] +
                INFO_FIELDS.map do |label, field, format|
                  value = info[field]
                  [label, value.nil? ? Format.unavailable("not in INFO") : info_value(value, format)]
                end)
        end

        def info_value(value, format)
          case format
          when nil then value
          when :max_memory then value.to_i.zero? ? "no limit" : Format.bytes(value.to_i)
          when :on_off then value == "1" ? "on" : "off"
          else Format.public_send(format, value.to_f)
          end
        end

        def nodes
          nodes = snapshot.nodes
          return unavailable_note(nodes) if unavailable?(nodes)

          table(
            [["Node"], ["State"], ["Last success"], ["Observed"]],
            nodes.map do |n|
              r = n["redis"]
              unless observed?(r)
                next [tag(:code, node_label(n)), Format.unavailable("not observed"), Format.unavailable, Format.unavailable]
              end

              last_ok = r["last_ok_ms"]
              [tag(:code, node_label(n)), state(r["state"]),
               last_ok.is_a?(Numeric) ? "#{Format.time(last_ok)} (#{Format.age(now_ms - last_ok)})" : Format.unavailable("never"),
               part_freshness(r)]
            end,
            empty: "No live node."
          )
        end
      end
    end
  end
end
