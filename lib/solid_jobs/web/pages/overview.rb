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
            "window" => {"from_ms" => series&.from_ms, "to_ms" => series&.to_ms, "buckets" => series&.count},
            "series" => series_data
          }
        end

        private

        def journal = snapshot.journal

        def series
          return nil if unavailable?(journal)

          @series ||= Series.new(journal, now_ms: now_ms, window_ms: snapshot.window_ms)
        end

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
            ["Running now", running_now(nodes)],
            ["Completed / s (last bucket)", last_rate]
          ]
        end

        def count_or(value) = unavailable?(value) ? Format.unavailable(value.reason) : Format.count(value)

        def running_now(nodes)
          return Format.unavailable(nodes.reason) if unavailable?(nodes)

          ractors = nodes.map { |n| n["ractors"] }
          return Format.unavailable("no node reports its workers") if ractors.none? { |r| r.is_a?(Array) }

          Format.count(ractors.grep(Array).flatten.count { |r| r["state"] == "running" })
        end

        def last_rate
          return Format.unavailable(journal.reason) unless series

          values = series.rate("completed")
          value = values.reverse.find { |v| !v.nil? }
          value.nil? ? Format.unavailable("no metrics in the window") : value.round(1).to_s
        end

        # Says what the charts cover when the journal read did not reach
        # back over the whole window.
        def journal_note
          return unavailable_note(journal) if unavailable?(journal)

          oldest = journal.first
          window_from = series.from_ms
          text = "Last #{Format.ms(snapshot.window_ms)} in #{Format.ms(snapshot.window_ms / series.count)} buckets, " \
                 "from the telemetry journal's metrics.interval entries (exact counts). Shaded: no source reported."
          if journal.size >= Snapshot::JOURNAL_READ && oldest && oldest["at_ms"].to_i > window_from
            text += " The newest #{Format.count(journal.size)} entries reach back only to #{Format.time(oldest["at_ms"])}."
          end
          tag(:p, text, class: "note")
        end

        def charts
          return [] unless series

          common = {from_ms: series.from_ms, to_ms: series.to_ms}
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
            Chart.new(title: "Latency: enqueue to start (highest reported)", kind: :line, format: :ms, **common, series: [
              {name: "p50", values: series.highest("latency_ms", "p50"), css: "s3"},
              {name: "p95", values: series.highest("latency_ms", "p95"), css: "s1"},
              {name: "max", values: series.highest("latency_ms", "max"), css: "s2"}
            ]),
            Chart.new(title: "Duration: start to finish (highest reported)", kind: :line, format: :ms, **common, series: [
              {name: "p50", values: series.highest("duration_ms", "p50"), css: "s3"},
              {name: "p95", values: series.highest("duration_ms", "p95"), css: "s1"}
            ])
          ]
        end
      end
    end
  end
end
