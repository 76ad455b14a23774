# frozen_string_literal: true

module SolidJobs
  class Web
    module Pages
      # Throughput, failures and latency over the last minutes (from the
      # journal's metrics.interval entries, which are exact per interval),
      # and what is waiting now.
      class Overview < Page
        TITLE = "Overview"

        def body
          [tiles(summary_tiles), journal_note,
           tag(:div, charts.map(&:to_html), class: "charts")]
        end

        def to_h
          {
            "page" => "overview", "now_ms" => now_ms,
            "ready" => json_value(ready), "counts" => snapshot.counts.transform_values { |v| json_value(v) },
            "nodes" => unavailable?(snapshot.nodes) ? json_value(snapshot.nodes) : snapshot.nodes.size,
            "engine_only_nodes" => engine_only_count,
            "window" => {"from_ms" => series&.from_ms, "to_ms" => series&.to_ms, "buckets" => series&.count},
            "series" => series_data
          }
        end

        private

        def journal = snapshot.journal

        def series = snapshot.series

        def ready
          channels = snapshot.channels
          unavailable?(channels) ? channels : channels.sum { |c| c["depth"].to_i }
        end

        def series_data
          return json_value(journal) unless series

          {
            "completed_per_s" => series.rate("completed"), "failed_per_s" => series.rate("failed"),
            "enqueued_per_s" => series.rate("enqueued"), "retried_per_s" => series.rate("retried"),
            "dead_per_s" => series.rate("dead"),
            "latency_p50_ms" => series.highest("latency_ms", "p50"), "latency_p95_ms" => series.highest("latency_ms", "p95"),
            "latency_max_ms" => series.highest("latency_ms", "max"),
            "duration_p50_ms" => series.highest("duration_ms", "p50"), "duration_p95_ms" => series.highest("duration_ms", "p95")
          }
        end

        def summary_tiles
          counts = snapshot.counts
          nodes = snapshot.nodes
          [
            ["Ready", count_or(ready)],
            ["Planned", count_or(counts["planned"])],
            ["Retrying", count_or(counts["retrying"])],
            ["Archived", count_or(counts["archived"])],
            ["Nodes", unavailable?(nodes) ? Format.unavailable(nodes.reason) : Format.count(nodes.size)],
            *engine_only_tile,
            ["Running now", running_now(nodes)],
            ["Completed, last minute", last_minute("completed")],
            ["Failed, last minute", last_minute("failed")]
          ]
        end

        def count_or(value) = unavailable?(value) ? Format.unavailable(value.reason) : Format.count(value)

        def engine_only_count
          return nil if snapshot.engine_backends.empty?

          missing = snapshot.engines.map { |e| e["nodes"] }.find { |list| unavailable?(list) }
          missing ? json_value(missing) : snapshot.engine_only_nodes.size
        end

        # Only where SolidEngine backends are configured: the nodes the
        # Nodes tile cannot count (they write nothing to Redis).
        def engine_only_tile
          return [] if snapshot.engine_backends.empty?

          # An engine that did not answer makes the count unknown, not smaller.
          missing = snapshot.engines.map { |e| e["nodes"] }.find { |list| unavailable?(list) }
          count = missing ? Format.unavailable(missing.reason) : Format.count(snapshot.engine_only_nodes.size)
          [["SolidEngine-only nodes", count]]
        end

        def running_now(nodes)
          return Format.unavailable(nodes.reason) if unavailable?(nodes)

          ractors = nodes.map { |n| n["ractors"] }
          return Format.unavailable("no node reports its workers") if ractors.none? { |r| r.is_a?(Array) }

          Format.count(ractors.grep(Array).flatten.count { |r| r["state"] == "running" })
        end

        # Exact: the sum of the metrics.interval counts that ended in the
        # last minute. "≥" when the journal no longer reaches back a minute.
        def last_minute(field)
          return Format.unavailable(journal.reason) if unavailable?(journal)

          since = now_ms - 60_000
          total = journal.sum do |e|
            e["event"] == "metrics.interval" && e["at_ms"].to_i > since ? e.dig("data", field).to_i : 0
          end
          oldest = journal.first
          partial = oldest && oldest["at_ms"].to_i > since && !journal_complete?
          "#{partial ? "≥ " : ""}#{Format.count(total)}"
        end

        # Whether the read holds the whole journal and the journal was never
        # trimmed (it is below its cap), so nothing older exists.
        def journal_complete?
          stream = snapshot.freshness
          return false if unavailable?(stream)

          length = stream["length"].to_i
          length <= journal.size && length < SolidJobs.config.telemetry_journal_size
        end

        # Says what the charts cover, and when the journal no longer holds
        # the start of the window.
        def journal_note
          return unavailable_note(journal) if unavailable?(journal)

          text = "Last #{Format.ms(series.to_ms - series.from_ms)} in #{Format.ms(series.bucket_ms)} buckets, from the " \
                 "telemetry journal's metrics.interval entries (exact counts). Shaded: no source was reporting."
          oldest = journal.first
          if oldest && oldest["at_ms"].to_i > series.from_ms
            text += " The journal reaches back to #{Format.time(oldest["at_ms"])}."
          end
          tag(:p, text, class: "note")
        end

        def charts
          return [] unless series

          common = {from_ms: series.from_ms, to_ms: series.to_ms, known: series.known_mask}
          [
            Chart.new(title: "Throughput (jobs/s)", kind: :line, format: :number, **common, series: [
              {name: "completed", values: series.rate("completed"), css: "s1"},
              {name: "enqueued", values: series.rate("enqueued"), css: "s3"}
            ]),
            Chart.new(title: "Failures (per s)", kind: :bars, format: :number, **common, series: [
              {name: "failed", values: series.rate("failed"), css: "s2"},
              {name: "retried", values: series.rate("retried"), css: "s4"},
              {name: "dead", values: series.rate("dead"), css: "s1"}
            ]),
            Chart.new(title: "Latency: ready to start (highest reported)", kind: :line, format: :ms, **common, series: [
              {name: "p50", values: series.highest("latency_ms", "p50"), css: "s3"},
              {name: "p95", values: series.highest("latency_ms", "p95"), css: "s1"},
              {name: "max", values: series.highest("latency_ms", "max"), css: "s2"}
            ]),
            Chart.new(title: "Duration: run time (highest reported)", kind: :line, format: :ms, **common, series: [
              {name: "p50", values: series.highest("duration_ms", "p50"), css: "s3"},
              {name: "p95", values: series.highest("duration_ms", "p95"), css: "s1"}
            ])
          ]
        end
      end
    end
  end
end
