# frozen_string_literal: true

module SolidJobs
  class Web
    # Time series from journal entries: equal buckets over a window, one
    # value per bucket, nil where nothing is known (a gap, drawn as such).
    # Never interpolated.
    #
    # Nodes write metrics.interval only for intervals with activity, so a
    # bucket in which sources wrote other entries (their observations, every
    # heartbeat) but no metrics counts 0; a bucket in which no source wrote
    # anything is unknown.
    class Series
      attr_reader :from_ms, :to_ms, :count

      def initialize(entries, now_ms:, window_ms:, buckets: 60)
        @count = buckets
        @bucket_ms = window_ms / buckets
        # Buckets end on a multiple of their width, so a refresh moves the
        # chart by whole buckets; the last one is the current, partial one.
        @to_ms = (now_ms / @bucket_ms + 1) * @bucket_ms
        @from_ms = @to_ms - @bucket_ms * buckets
        @entries = entries.select { |e| e["at_ms"].to_i > @from_ms && e["at_ms"].to_i <= @to_ms }
      end

      def index(at_ms) = ((at_ms.to_i - @from_ms - 1) / @bucket_ms).clamp(0, @count - 1)

      def events(name) = @entries.select { |e| e["event"] == name }

      # Per second, from metrics.interval counts: each source's count over
      # the time its intervals cover in the bucket, summed over sources.
      def rate(field, event: "metrics.interval")
        rates = per_bucket(events(event)) do |entries|
          entries.group_by { |e| e["source"] }.sum do |_, mine|
            count = mine.sum { |e| e.dig("data", field).to_f }
            covered_ms = mine.sum { |e| (e.dig("data", "interval_ms") || @bucket_ms).to_f }
            covered_ms.positive? ? count * 1000 / covered_ms : 0.0
          end
        end
        rates.each_with_index.map { |r, i| r.nil? && heard?(i) ? 0.0 : r }
      end

      # Whether any source wrote anything in bucket i.
      def heard?(index)
        @heard ||= @entries.map { |e| index(e["at_ms"]) }.uniq
        @heard.include?(index)
      end

      # The highest value any source reported in the bucket (percentiles of
      # different sources cannot be merged exactly; the worst one is shown).
      def highest(*path, event: "metrics.interval")
        per_bucket(events(event)) do |entries|
          entries.filter_map { |e| number(e.dig("data", *path)) }.max
        end
      end

      # One series per source: the last value it reported in each bucket.
      def last_by_source(event, *path)
        events(event).group_by { |e| e["source"] }.transform_values do |mine|
          per_bucket(mine) { |entries| entries.filter_map { |e| number(e.dig("data", *path)) }.last }
        end
      end

      # One series per source: the increase of a cumulative counter per
      # second of elapsed time (CPU seconds -> cores busy, GC count -> per s),
      # from consecutive observations; the first has nothing to compare to.
      def derivative_by_source(event, *path, scale: 1.0)
        events(event).group_by { |e| e["source"] }.transform_values do |mine|
          deltas = mine.sort_by { |e| e["at_ms"].to_i }.each_cons(2).filter_map do |a, b|
            va = number(a.dig("data", *path))
            vb = number(b.dig("data", *path))
            dt = b["at_ms"].to_i - a["at_ms"].to_i
            next if va.nil? || vb.nil? || dt <= 0 || vb < va # a restart resets the counter

            {"at_ms" => b["at_ms"], "value" => (vb - va) * 1000.0 / dt * scale}
          end
          per_bucket(deltas) { |entries| entries.sum { |d| d["value"] } / entries.size }
        end
      end

      private

      def per_bucket(entries)
        grouped = entries.group_by { |e| index(e["at_ms"]) }
        Array.new(@count) { |i| grouped[i] ? yield(grouped[i]) : nil }
      end

      def number(value) = value.is_a?(Numeric) ? value : nil
    end
  end
end
