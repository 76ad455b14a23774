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
          return [unavailable_note(nodes)] if unavailable?(nodes)
          if nodes.empty?
            return [tag(:p, "No live node: no worker process has reported in the last few heartbeats.", class: "note")]
          end

          nodes.map { |n| node_section(n) }
        end

        def to_h
          nodes = snapshot.nodes
          {
            "page" => "nodes", "now_ms" => now_ms,
            "nodes" => unavailable?(nodes) ? json_value(nodes) : nodes.map do |n|
              {"node_id" => n["node_id"], "node" => n["node"], "observed_age_ms" => part_age(n["node"]),
               "ractors" => n["ractors"].is_a?(Array) ? n["ractors"] : {"unavailable" => "not observed"}}
            end
          }
        end

        private

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
