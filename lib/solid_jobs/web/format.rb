# frozen_string_literal: true

module SolidJobs
  class Web
    # Numbers, durations, sizes and times as a person reads them. nil means
    # the value is not known, and is shown as "unavailable", never as 0.
    module Format
      UNAVAILABLE = "unavailable"

      module_function

      def unavailable(reason = nil)
        Html.tag(:span, UNAVAILABLE, class: "unavailable", title: reason)
      end

      def or_unavailable(value, reason = nil)
        value.nil? ? unavailable(reason) : yield(value)
      end

      def count(n)
        return UNAVAILABLE if n.nil?

        n.to_i.to_s.reverse.scan(/\d{1,3}/).join(",").reverse.then { |s| n.to_i.negative? ? "-#{s}" : s }
      end

      # A rate or other real number: two significant decimals below 10.
      def number(value)
        return UNAVAILABLE if value.nil?

        v = value.to_f
        return count(v.round) if v.abs >= 10

        r = v.round(2)
        r == r.to_i ? r.to_i.to_s : r.to_s
      end

      def ms(value)
        return UNAVAILABLE if value.nil?

        v = value.to_f
        if v.zero? then "0 ms"
        elsif v < 1 then "#{v.round(2)} ms"
        elsif v < 1_000 then "#{v.round(v < 10 ? 1 : 0).then { |x| x == x.to_i ? x.to_i : x }} ms"
        elsif v < 60_000 then "#{(v / 1000).round(2)} s"
        elsif v < 3_600_000 then "#{(v / 60_000).round(1)} min"
        else "#{(v / 3_600_000).round(1)} h"
        end
      end

      def seconds(value) = value.nil? ? UNAVAILABLE : ms(value.to_f * 1000)

      def bytes(value)
        return UNAVAILABLE if value.nil?

        v = value.to_f
        units = %w[B KiB MiB GiB TiB]
        i = 0
        while v >= 1024 && i < units.size - 1
          v /= 1024
          i += 1
        end
        i.zero? ? "#{v.to_i} B" : "#{v.round(1).then { |x| x == x.to_i ? x.to_i : x }} #{units[i]}"
      end

      def percent(value) = value.nil? ? UNAVAILABLE : "#{value.to_f.round(1)} %"

      # An absolute time (UTC, to the second) for an epoch-ms value.
      def time(at_ms)
        return UNAVAILABLE if at_ms.nil?

        Time.at(at_ms / 1000.0).utc.strftime("%Y-%m-%d %H:%M:%S UTC")
      end

      def clock(at_ms)
        return UNAVAILABLE if at_ms.nil?

        Time.at(at_ms / 1000.0).utc.strftime("%H:%M:%S")
      end

      def age(age_ms)
        return UNAVAILABLE if age_ms.nil?

        "#{ms([age_ms, 0].max)} ago"
      end

      def short_id(id) = id.to_s[0, 8]
    end
  end
end
