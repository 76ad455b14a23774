# frozen_string_literal: true

module SolidJobs
  class Web
    # Time series from journal entries: equal buckets over a window, one
    # value per bucket, nil where nothing is known (a gap, drawn as such).
    # Never interpolated.
    #
    # What is known: nodes write metrics.interval only for intervals with
    # activity, but they write something (observations) every observation
    # interval. So a source is taken to be reporting from its first entry
    # read to its last (a node: plus the time its next observation may
    # take), except between two entries whose sequence numbers have a hole
    # (entries were lost there). A bucket in which some source was
    # reporting and wrote no metrics counts 0; a bucket in which none was
    # is unknown.
    class Series
      attr_reader :from_ms, :to_ms, :count, :bucket_ms

      # grace_ms: how long after its last entry a node still counts as
      # reporting (its next observation is due by then).
      def initialize(entries, now_ms:, window_ms:, buckets: 60, grace_ms: 11_000)
        @all = entries
        @now_ms = now_ms
        @count = buckets
        @bucket_ms = window_ms / buckets
        @grace_ms = grace_ms
        # Buckets end on a multiple of their width, so a refresh moves the
        # chart by whole buckets; the last one is the current, partial one.
        @to_ms = (now_ms / @bucket_ms + 1) * @bucket_ms
        @from_ms = @to_ms - @bucket_ms * buckets
        @entries = entries.select { |e| e["at_ms"].to_i > @from_ms && e["at_ms"].to_i <= @to_ms }
      end

      def index(at_ms) = ((at_ms.to_i - @from_ms - 1) / @bucket_ms).clamp(0, @count - 1)

      def events(name) = @entries.select { |e| e["event"] == name }

      # Per second, from metrics.interval counts: each entry's count spread
      # over the interval it covers (`interval_ms` before its time), summed
      # over sources.
      def rate(field, event: "metrics.interval")
        (@rates ||= {})[[field, event]] ||= compute_rate(field, event)
      end

      private def compute_rate(field, event)
        totals = Array.new(@count, 0.0)
        counted = Array.new(@count, false)
        @all.each do |e|
          next unless e["event"] == event

          n = e.dig("data", field)
          next unless n.is_a?(Numeric)

          stop = e["at_ms"].to_i
          length = [number(e.dig("data", "interval_ms")) || 1000, 1].max.to_f
          spread(stop - length, stop) do |i, overlap_ms|
            totals[i] += n * overlap_ms / length
            counted[i] = true
          end
        end
        Array.new(@count) do |i|
          next nil unless counted[i] || known?(i)

          totals[i] * 1000.0 / elapsed_ms(i)
        end
      end

      # The highest value any source reported in the bucket (percentiles of
      # different sources cannot be merged exactly; the worst one is shown).
      # nil where no job ran: there is no latency without jobs.
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

      # Per bucket: whether anything is known (a count, or a source
      # reporting).
      def known_mask
        @known_mask ||= rate("completed").each_with_index.map { |v, i| !v.nil? || known?(i) }
      end

      # Whether some source was reporting in bucket i (see the class notes).
      def known?(index)
        @known ||= begin
          spans = reporting_spans
          Array.new(@count) do |i|
            mid = @from_ms + i * @bucket_ms + @bucket_ms / 2
            mid = [mid, @now_ms].min
            spans.any? { |first, last, lost| mid.between?(first, last) && lost.none? { |a, b| mid > a && mid < b } }
          end
        end
        @known[index]
      end

      private

      # Per source: [first at_ms, last at_ms (+ grace for nodes), [lost
      # ranges]].
      def reporting_spans
        @all.group_by { |e| e["source"] }.map do |source, mine|
          times = mine.map { |e| e["at_ms"].to_i }
          last = times.max
          last = [last + @grace_ms, @now_ms].min unless source.to_s.start_with?("publisher:")
          lost = mine.uniq { |e| e["seq"] }.sort_by { |e| e["seq"].to_i }.each_cons(2).filter_map do |a, b|
            next unless b["seq"].to_i > a["seq"].to_i + 1

            [a["at_ms"].to_i, b["at_ms"].to_i].minmax
          end
          [times.min, last, lost]
        end
      end

      # Yields each bucket overlapping [start, stop) with the overlap in ms.
      def spread(start, stop)
        first = [index(start + 1), 0].max
        last = index(stop)
        (first..last).each do |i|
          b_start = @from_ms + i * @bucket_ms
          overlap = [stop, b_start + @bucket_ms].min - [start, b_start].max
          yield i, overlap if overlap.positive? && stop > @from_ms && start < @to_ms
        end
      end

      # The current bucket has lasted only until now.
      def elapsed_ms(index)
        start = @from_ms + index * @bucket_ms
        [[@now_ms, start + @bucket_ms].min - start, 1].max
      end

      def per_bucket(entries)
        grouped = entries.group_by { |e| index(e["at_ms"]) }
        Array.new(@count) { |i| grouped[i] ? yield(grouped[i]) : nil }
      end

      def number(value) = value.is_a?(Numeric) ? value : nil
    end
  end
end
