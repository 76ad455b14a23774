# frozen_string_literal: true

module SolidJobs
  class Web
    module Pages
      # Whether the telemetry can be trusted: when each source last wrote,
      # and the entries lost between what it wrote (holes in its sequence
      # numbers).
      class Telemetry < Page
        TITLE = "Telemetry"

        def body
          journal = snapshot.journal
          [
            section("Journal", journal_facts(journal)),
            section("Sources", sources(journal)),
            section("Gaps", gaps),
            section("Writers", writers)
          ]
        end

        def to_h
          {
            "page" => "telemetry", "now_ms" => now_ms,
            "freshness" => json_value(snapshot.freshness),
            "sources" => if unavailable?(snapshot.journal)
                           json_value(snapshot.journal)
                         else
                           source_rows.map { |r| r.slice("source", "last_at_ms", "last_seq", "entries", "age_ms") }
                         end,
            "gaps" => json_value(snapshot.gaps),
            "writers" => if unavailable?(snapshot.nodes)
                           json_value(snapshot.nodes)
                         else
                           snapshot.nodes.map { |n| {"node_id" => n["node_id"], "telemetry" => writer(n)} }
                         end
          }
        end

        private

        def journal_facts(journal)
          return unavailable_note(journal) if unavailable?(journal)

          stream = snapshot.freshness
          length = unavailable?(stream) ? Format.unavailable(stream.reason) : shown(stream["length"], :count)
          newest = journal.last
          events = journal.group_by { |e| e["event"] }.transform_values(&:size).sort_by { |name, _| name.to_s }
          covering = if newest
                       "#{Format.time(journal.first["at_ms"])} – #{Format.time(newest["at_ms"])}"
                     else
                       Format.unavailable("empty journal")
                     end
          facts([
            ["Length", [length, " entries (capped at about #{Format.count(SolidJobs.config.telemetry_journal_size)})"]],
            ["Entries read", "#{Format.count(journal.size)}, the newest (at most " \
                             "#{Format.count([SolidJobs.config.telemetry_journal_size, Snapshot::JOURNAL_READ].min)} " \
                             "per page view)"],
            ["Covering", covering],
            ["Newest entry", newest ? freshness(now_ms - newest["at_ms"].to_i, nil) : Format.unavailable("empty journal")],
            ["Events read", events.empty? ? "none" : events.map { |name, n| "#{name} #{Format.count(n)}" }.join(" · ")]
          ])
        end

        def source_rows
          @source_rows ||= snapshot.journal.group_by { |e| e["source"] }.map do |source, entries|
            last = entries.max_by { |e| [e["at_ms"].to_i, e["seq"].to_i] }
            {"source" => source, "last_at_ms" => last["at_ms"], "last_seq" => last["seq"], "entries" => entries.size,
             "age_ms" => now_ms - last["at_ms"].to_i}
          end.sort_by { |r| r["age_ms"] }
        end

        def sources(journal)
          return unavailable_note(journal) if unavailable?(journal)

          table(
            [["Source"], ["Kind"], ["Entries read", "num"], ["Last seq", "num"], ["Last entry"]],
            source_rows.map do |r|
              kind = r["source"].to_s.start_with?("publisher:") ? "publisher" : "node"
              stale = r["age_ms"] > 3 * (SolidJobs.config.heartbeat_interval * 1000)
              [tag(:code, r["source"]), kind, Format.count(r["entries"]), Format.count(r["last_seq"]),
               freshness(r["age_ms"], !stale)]
            end,
            empty: "No entries: nothing has written telemetry yet."
          )
        end

        def gaps
          gaps = snapshot.gaps
          return unavailable_note(gaps) if unavailable?(gaps)

          rows = gap_rows(gaps)
          [
            tag(:p, "A gap is a run of sequence numbers a source wrote that the journal does not hold (trimmed or lost). " \
                    "Within the entries read, the oldest entry of each source is not compared with what came before it.",
                class: "note"),
            table([["Source"], ["Missing seq", "num"], ["Entries lost", "num"]], rows, empty: "No gaps in the entries read.")
          ]
        end

        # Each node's own account of its journal writer (from its node
        # observation): entries written, dropped before reaching Redis
        # (a full buffer or Redis down), and waiting to be written.
        def writers
          nodes = snapshot.nodes
          return unavailable_note(nodes) if unavailable?(nodes)

          table(
            [["Node"], ["Last seq", "num"], ["Dropped", "num"], ["Pending", "num"], ["Observed"]],
            nodes.map do |n|
              t = writer(n)
              unless t
                next [tag(:code, node_label(n)), *Array.new(3) { Format.unavailable("not reported") }, part_freshness(n["node"])]
              end

              dropped = t["dropped"]
              [tag(:code, node_label(n)), shown(t["seq"], :count),
               dropped.to_i.positive? ? tag(:span, Format.count(dropped), class: "bad") : shown(dropped, :count),
               shown(t["pending"], :count), part_freshness(n["node"])]
            end,
            empty: "No live node."
          )
        end

        def writer(n)
          t = observed?(n["node"]) ? n["node"]["telemetry"] : nil
          t.is_a?(Hash) ? t : nil
        end

        # Accepts {source => [[from, to], ...]} or [{"source", "from", "to", "size"}].
        def gap_rows(gaps)
          list = if gaps.is_a?(Hash)
                   gaps.flat_map { |source, ranges| Array(ranges).map { |r| normalize_gap(source, r) } }
                 else
                   Array(gaps).map { |g| normalize_gap(g["source"], g) }
                 end
          list.map { |g| [tag(:code, g[:source]), g[:range], Format.count(g[:size])] }
        end

        def normalize_gap(source, gap)
          from, to, size = case gap
                           when Hash then [gap["from"] || gap["first"], gap["to"] || gap["last"], gap["size"] || gap["missing"]]
                           when Array then gap
                           else [gap, gap, 1]
                           end
          size ||= to.to_i - from.to_i + 1 if from && to
          {source: source, range: from == to ? from.to_s : "#{from}–#{to}", size: size}
        end
      end
    end
  end
end
