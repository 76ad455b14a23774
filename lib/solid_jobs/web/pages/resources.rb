# frozen_string_literal: true

module SolidJobs
  class Web
    module Pages
      # Each node's process: CPU, resident memory and GC, now (its latest
      # observation) and over the window (the journal's process.observed).
      class Resources < Page
        TITLE = "Resources"
        SERIES_CSS = %w[s1 s2 s3 s4].freeze

        def body
          nodes = snapshot.nodes
          [
            section("Now", unavailable?(nodes) ? unavailable_note(nodes) : now_table(nodes)),
            section("Over time", charts)
          ]
        end

        def to_h
          nodes = snapshot.nodes
          {
            "page" => "resources", "now_ms" => now_ms,
            "nodes" => unavailable?(nodes) ? json_value(nodes) : nodes.map do |n|
              {"node_id" => n["node_id"], "process" => observed?(n["process"]) ? n["process"] : {"unavailable" => "not observed"},
               "cpu_percent" => cpu_percent(n["node_id"])}
            end
          }
        end

        private

        def now_table(nodes)
          table(
            [["Node"], ["CPU (last interval)", "num"], ["CPU time", "num"], ["RSS", "num"], ["GC runs", "num"],
             ["GC time", "num"], ["Allocated objects", "num"], ["Observed"]],
            nodes.map do |n|
              p = n["process"]
              unless observed?(p)
                next [tag(:code, node_label(n)), *Array.new(6) { Format.unavailable("not observed") }, part_freshness(p)]
              end

              # Fields the node could not read on this platform are nil
              # (and listed in p["unavailable"]): shown as unavailable.
              [tag(:code, node_label(n)), shown(cpu_percent(n["node_id"]), :percent), shown(p["cpu_seconds"], :seconds),
               shown(p["rss_bytes"], :bytes), shown(p["gc_count"], :count), shown(p["gc_time_ms"], :ms),
               shown(p["total_allocated_objects"], :count), part_freshness(p)]
            end,
            empty: "No live node."
          )
        end

        def series = snapshot.series

        # Percent of one core, from the source's last two process.observed.
        def cpu_percent(node_id)
          return nil unless series

          values = series.derivative_by_source("process.observed", "cpu_seconds", scale: 100.0)[node_id]
          values&.reverse&.find { |v| !v.nil? }
        end

        def charts
          return unavailable_note(snapshot.journal) unless series

          common = {from_ms: series.from_ms, to_ms: series.to_ms}
          tag(:div, [
            Chart.new(title: "CPU (% of one core)", format: :number, **common,
                      series: per_node(series.derivative_by_source("process.observed", "cpu_seconds", scale: 100.0))),
            Chart.new(title: "Resident memory (RSS)", format: :bytes, **common,
                      series: per_node(series.last_by_source("process.observed", "rss_bytes"))),
            Chart.new(title: "GC runs per second", format: :number, **common,
                      series: per_node(series.derivative_by_source("process.observed", "gc_count"))),
            Chart.new(title: "GC time (ms per second)", format: :number, **common,
                      series: per_node(series.derivative_by_source("process.observed", "gc_time_ms")))
          ].map(&:to_html), class: "charts")
        end

        # Process sources only (nodes), at most four lines per chart. A node
        # observes every observation_interval, so its line goes on across
        # the buckets in between; a longer silence is a gap.
        def per_node(by_source)
          interval_ms = SolidJobs.config.observation_interval * 1000
          bridge = ((2 * interval_ms + 1000) / series.bucket_ms).ceil
          by_source.reject { |source, _| source.to_s.start_with?("publisher:") }.first(SERIES_CSS.size)
                   .each_with_index.map do |(source, values), i|
            {name: source_name(source), values: values, css: SERIES_CSS[i], bridge: bridge}
          end
        end
      end
    end
  end
end
