# frozen_string_literal: true

module SolidJobs
  class Web
    module Pages
      # Live nodes (worker processes) and their workers: each Ractor's (or
      # thread's) state and the job it runs, from the nodes' observations.
      class Nodes < Page
        TITLE = "Nodes"

        def body
          nodes = snapshot.nodes
          redis_part = if unavailable?(nodes) then [unavailable_note(nodes)]
                       elsif nodes.empty? && engine_only.empty?
                         [tag(:p, no_node_note, class: "note")]
                       else nodes.map { |n| node_section(n) }
                       end
          [redis_part, engine_only.map { |n| engine_node_section(n) }, engines_section]
        end

        def to_h
          nodes = snapshot.nodes
          {
            "page" => "nodes", "now_ms" => now_ms,
            "nodes" => unavailable?(nodes) ? json_value(nodes) : nodes.map do |n|
              {"node_id" => n["node_id"], "node" => n["node"], "observed_age_ms" => part_age(n["node"]),
               "ractors" => n["ractors"].is_a?(Array) ? n["ractors"] : {"unavailable" => "not observed"}}
            end,
            "engine_nodes" => engine_only,
            "engines" => snapshot.engines.map do |e|
              e.merge("stats" => json_value(e["stats"]), "nodes" => json_value(e["nodes"]))
            end
          }
        end

        private

        def engine_only = snapshot.engine_only_nodes

        # "No node" only when every source of nodes answered.
        def no_node_note
          silent = snapshot.engines.select { |e| unavailable?(e["nodes"]) }.map { |e| e["name"] }
          return "No live node: no worker process has reported in the last few heartbeats." if silent.empty?

          "No live node in Redis; the nodes of SolidEngine #{silent.join(", ")} are unavailable (below)."
        end

        def engine_node_section(n)
          node = n["node"]
          observed = node["observed"].is_a?(Hash) ? node["observed"] : nil
          tag(:section, [
            tag(:h2, ["Node ", tag(:code, node_label(n)), " ", tag(:span, "SolidEngine only", class: "state"),
                      *(observed ? [" ", tag(:span, observed["state"].to_s, class: "state")] : [])]),
            facts([
              ["Node id", tag(:code, n["node_id"])],
              ["Host / pid", "#{node["hostname"]} / #{node["pid"]}"],
              ["Workers", [shown(node["concurrency"].is_a?(Integer) ? node["concurrency"] : nil, :count), " (",
                           shown(node["execution_mode"]), ")",
                           *(observed ? [": ", worker_states(observed["workers"])] : [])]],
              *observed_facts(n, observed),
              ["Channels", Array(node["channels"]).map { |c| c.is_a?(Array) ? "#{c[0]}(#{c[1]})" : c.to_s }.join(", ")],
              ["Started", node["started_ms"].is_a?(Numeric) ? Format.time(node["started_ms"]) : Format.unavailable],
              ["Version", shown(node["version"])],
              ["Announced to", [tag(:code, n["backend"]), " ", Format.age(n["age_ms"]), " (kept ",
                                Format.ms(n["ttl_ms"]), " without a new one; it announces every heartbeat)"]]
            ]),
            tag(:p, "Its channels are all on SolidEngine, so it writes nothing to Redis: it announces itself and its " \
                    "latest observation in short (state, workers by state, memory, CPU) to its engine every heartbeat. " \
                    "Per-worker jobs, the journal and control requests travel through Redis and are not available " \
                    "for it.", class: "note")
          ], class: "node", "data-node-id": n["node_id"])
        end

        # "2 running, 6 waiting" from the announced counts.
        def worker_states(counts)
          return Format.unavailable unless counts.is_a?(Hash)

          # Only as far as its shape holds: a count that is not an Integer
          # is left out.
          counts.select { |state, count| state.is_a?(String) && count.is_a?(Integer) }
                .sort.map { |state, count| "#{Format.count(count)} #{state}" }.join(", ")
        end

        # Memory, CPU and the observation's age: the announcement's age plus
        # the observation's age when it was sent (no clock compared).
        def observed_facts(entry, observed)
          unless observed
            why = "not announced yet (or telemetry is off, or the node's description left it no room)"
            return [["Observed", Format.unavailable(why)]]
          end

          process = observed["process"].is_a?(Hash) ? observed["process"] : {}
          age = observed["age_ms"].is_a?(Numeric) && entry["age_ms"].is_a?(Numeric) ? observed["age_ms"] + entry["age_ms"] : nil
          rss = process["rss_bytes"].is_a?(Integer) ? process["rss_bytes"] : nil
          [["Memory (RSS)", shown(rss, :bytes)],
           ["CPU", process["cpu_seconds"].is_a?(Numeric) ? "#{process["cpu_seconds"].round(1)} s" : Format.unavailable],
           ["Observed", age ? Format.age(age) : Format.unavailable]]
        end

        ENGINE_FIGURES = [%w[ready Ready], %w[scheduled Scheduled], ["reserved", "Reserved (leases held)"],
                          %w[dead Dead], %w[completed Completed], %w[connections Connections]].freeze

        def engines_section
          engines = snapshot.engines
          return nil if engines.empty?

          section("SolidEngine servers", table(
            [["Backend"], ["URL"], *ENGINE_FIGURES.map { |_, label| [label, "num"] }, ["Nodes announced", "num"],
             ["Durability"], ["Up"]],
            engines.map do |e|
              stats = e["stats"]
              nodes = e["nodes"]
              if unavailable?(stats)
                next [tag(:code, e["name"]), tag(:code, e["url"]),
                      Format.unavailable(stats.reason),
                      # The other figures, nodes announced, durability, up.
                      *Array.new(ENGINE_FIGURES.size - 1 + 3, "")]
              end

              [tag(:code, e["name"]), tag(:code, e["url"]), *ENGINE_FIGURES.map { |key, _| Format.count(stats[key]) },
               unavailable?(nodes) ? Format.unavailable(nodes.reason) : Format.count(nodes.size),
               stats["durability"].to_s, stats["uptime_s"] ? Format.ms(stats["uptime_s"] * 1000) : Format.unavailable]
            end,
            empty: "No SolidEngine backend configured."
          ), tag(:p, "From each engine's STATS and NODES, read with the configured timeouts. Completed counts " \
                     "jobs within the engine's completed_retention_ms.", class: "note"))
        end

        def node_section(n)
          node = observed?(n["node"]) ? n["node"] : nil
          tag(:section, [
            tag(:h2, ["Node ", tag(:code, node_label(n)), " ", state(node && node["state"]),
                      n["alive"] == false ? [" ", tag(:span, "heartbeat expired", class: "bad")] : nil]),
            node ? node_facts(n, node) : tag(:p, [Format.unavailable, " — this node's description was not observed"],
                                             class: "note"),
            tag(:h2, "Workers"),
            ractors(n["ractors"])
          ], class: "node", "data-node-id": n["node_id"])
        end

        def node_facts(n, node)
          started = node["started_ms"]
          uptime = started.is_a?(Numeric) ? "#{Format.time(started)} (up #{Format.ms(now_ms - started)})" : Format.unavailable
          facts([
            ["Node id", tag(:code, n["node_id"] || node["node_id"])],
            ["Host / pid", "#{node["hostname"]} / #{node["pid"]}"],
            ["Workers", [shown(node["concurrency"], :count), " (", shown(node["execution_mode"]), ")"]],
            ["Channels", Array(node["channels"]).map { |c| c.is_a?(Array) ? "#{c[0]}(#{c[1]})" : c.to_s }.join(", ")],
            ["Started", uptime],
            ["Version", shown(node["version"])],
            ["Observed", part_freshness(node)]
          ])
        end

        def ractors(list)
          return tag(:p, [Format.unavailable, " — workers not observed"], class: "note") unless list.is_a?(Array)
          return tag(:p, [Format.unavailable, " — no worker observed yet"], class: "note") if list.empty?

          table(
            [["Worker", "num"], ["Ractor", "num"], ["State"], ["Current job"], ["Observed"]],
            list.sort_by { |r| r["worker_id"].to_i }.map do |r|
              jobs = Array(r["job_ids"])
              [Format.count(r["worker_id"]), r["ractor_id"].nil? ? "—" : Format.count(r["ractor_id"]), state(r["state"]),
               jobs.empty? ? tag(:span, "idle", class: "muted") : jobs.map { |id| [job_link(id), " "] },
               part_freshness(r)]
            end,
            empty: "No workers reported."
          )
        end
      end
    end
  end
end
