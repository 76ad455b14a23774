# frozen_string_literal: true

require "json"

module SolidJobs
  module Telemetry
    # Reads the telemetry journal (`<namespace>:telemetry`, a capped Redis
    # stream; docs/observability.md). Each source numbers its entries 1, 2,
    # 3...: a number missing between two present ones is a lost entry
    # (dropped from a full buffer, or never written), reported by #gaps.
    #
    #   journal = SolidJobs::Telemetry::Journal.new
    #   entries = journal.entries(count: 500)   # oldest first
    #   journal.gaps(entries)                   # [{"source", "from", "to", "size"}]
    class Journal
      def initialize(client: SolidJobs.client, namespace: SolidJobs.config.namespace)
        @client = client
        @key = Native::Keyspace.new(namespace).telemetry
      end

      # Decoded entries, oldest first: {"id" (stream id), "source", "seq",
      # "event", "at_ms", "data" (a Hash)}. Without `after`, the newest
      # `count`; with `after` (a stream id), up to `count` entries after it.
      def entries(count: 500, after: nil)
        raw = if after
                @client.call(["XRANGE", @key, "(#{after}", "+", "COUNT", count.to_s])
              else
                @client.call(["XREVRANGE", @key, "+", "-", "COUNT", count.to_s]).reverse
              end
        raw.map { |id, fields| decode(id, fields) }
      end

      # Missing sequence numbers per source among `entries`: only holes
      # between two entries read count (entries older than the window are
      # not missing, only unread). Duplicates (a flush retried after a lost
      # reply) are ignored.
      def gaps(entries)
        entries.group_by { |e| e["source"] }.flat_map do |source, mine|
          mine.map { |e| e["seq"] }.uniq.sort.each_cons(2).filter_map do |a, b|
            {"source" => source, "from" => a + 1, "to" => b - 1, "size" => b - a - 1} if b > a + 1
          end
        end
      end

      # {"newest_at_ms", "age_ms", "length"}: how recent the journal is.
      def freshness(now_ms: Clock.now_ms)
        newest = entries(count: 1).last
        length = @client.call(["XLEN", @key]).to_i
        return {"newest_at_ms" => nil, "age_ms" => nil, "length" => length} unless newest

        {"newest_at_ms" => newest["at_ms"], "age_ms" => [now_ms - newest["at_ms"], 0].max, "length" => length}
      end

      private

      def decode(id, fields)
        f = fields.each_slice(2).to_h
        data = begin
          parsed = JSON.parse(f["data"].to_s)
          parsed.is_a?(Hash) ? parsed : {}
        rescue JSON::ParserError
          {}
        end
        {"id" => id, "source" => f["source"], "seq" => f["seq"].to_i, "event" => f["event"], "at_ms" => f["at_ms"].to_i,
         "data" => data}
      end
    end
  end
end
