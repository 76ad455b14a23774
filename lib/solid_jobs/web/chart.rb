# frozen_string_literal: true

module SolidJobs
  class Web
    # Inline SVG charts: no script, no external asset, styled by the page's
    # stylesheet through classes. A bucket without data (nil) is drawn as a
    # shaded gap and breaks the line: a missing value is never drawn as 0
    # nor interpolated across.
    class Chart
      WIDTH = 640
      HEIGHT = 170
      LEFT = 66
      RIGHT = 10
      TOP = 12
      BOTTOM = 24

      # series: [{name:, values: [Numeric or nil, ...], css: "s1", bridge: 0}],
      # one value per bucket; buckets are equal slices of [from_ms, to_ms].
      # `bridge`: a line goes on across up to that many empty buckets (for
      # values sampled less often than once per bucket, like observations);
      # a longer run is a gap. kind: :line or :bars. format: a Format
      # method for axis labels.
      # known: optional, per bucket, whether anything was known then; only
      # unknown buckets are shaded (a known bucket may have no value: no
      # job ran, so there is no latency). Without it, a bucket is shaded
      # when no series has a value there.
      def initialize(title:, series:, from_ms:, to_ms:, kind: :line, format: :count, known: nil)
        @known = known
        @title = title
        @series = series
        @from_ms = from_ms
        @to_ms = to_ms
        @kind = kind
        @format = format
        @buckets = series.map { |s| s[:values].size }.max.to_i
      end

      def to_html
        plot = if values.empty?
                 empty_plot
               else
                 [gaps, grid, @kind == :bars ? bars : lines]
               end
        Html.tag(:figure, [
          Html.tag(:svg, [Html.tag(:title, @title), frame, plot, x_axis],
                   class: "chart", viewBox: "0 0 #{WIDTH} #{HEIGHT}", role: "img", xmlns: "http://www.w3.org/2000/svg",
                   preserveAspectRatio: "none", "aria-label": @title, "data-chart": @kind),
          Html.tag(:figcaption, [Html.tag(:strong, @title), legend])
        ], class: "chart")
      end

      private

      def values = @values ||= @series.flat_map { |s| s[:values] }.compact
      def plot_w = WIDTH - LEFT - RIGHT
      def plot_h = HEIGHT - TOP - BOTTOM
      def bucket_w = plot_w.to_f / [@buckets, 1].max
      def x(i) = LEFT + i * bucket_w
      def y(v) = TOP + plot_h - (v.to_f / y_max * plot_h)

      # A round number at or above the largest value, so the four gridlines
      # read well (in KiB, MiB... for sizes).
      def y_max
        @y_max ||= begin
          max = values.max.to_f
          if max <= 0 then 1.0
          else
            unit = @format == :bytes ? 1024**Math.log(max, 1024).floor : 1
            magnitude = 10**Math.log10(max / unit).floor
            [1, 2, 4, 6, 8, 10].map { |m| m * magnitude * unit }.find { |c| c >= max }.to_f
          end
        end
      end

      def num(f) = f.round(1)

      def frame
        Html.tag(:rect, nil, x: LEFT, y: TOP, width: plot_w, height: plot_h, class: "plot")
      end

      def grid
        (0..4).map do |k|
          v = y_max * k / 4
          yy = num(y(v))
          [Html.tag(:line, nil, x1: LEFT, x2: WIDTH - RIGHT, y1: yy, y2: yy, class: "grid"),
           Html.tag(:text, label(v), x: LEFT - 6, y: yy + 4, class: "axis", "text-anchor": "end")]
        end
      end

      def label(v)
        @format == :count ? Format.count(v.round) : Format.public_send(@format, v)
      end

      def x_axis
        span_ms = @to_ms - @from_ms
        [0, 0.5, 1].map do |f|
          ago = span_ms * (1 - f)
          text = ago.zero? ? "now" : "-#{Format.ms(ago)}"
          anchor = {0 => "start", 0.5 => "middle", 1 => "end"}.fetch(f)
          Html.tag(:text, text, x: num(LEFT + plot_w * f), y: HEIGHT - 6, class: "axis", "text-anchor": anchor)
        end
      end

      # Shaded columns where no series has a value (nor bridges over).
      def gaps
        @gaps ||= (0...@buckets).filter_map do |i|
          next if @known ? @known[i] : @series.any? { |s| covered(s)[i] }

          Html.tag(:rect, nil, x: num(x(i)), y: TOP, width: num(bucket_w), height: plot_h, class: "gap")
        end
      end

      # Per bucket: a value, or inside a bridged run of empty buckets.
      def covered(series)
        @covered ||= {}.compare_by_identity
        @covered[series] ||= begin
          values = series[:values]
          bridge = series[:bridge].to_i
          present = values.each_index.reject { |i| values[i].nil? }
          out = values.map { |v| !v.nil? }
          present.each_cons(2) { |a, b| (a..b).each { |i| out[i] = true } if b - a - 1 <= bridge }
          out
        end
      end

      def lines
        @series.map do |s|
          filled = covered(s)
          segments = s[:values].each_with_index.select { |_, i| filled[i] }
                               .chunk_while { |(_, a), (_, b)| b == a + 1 }
                               .map { |seg| seg.reject { |v, _| v.nil? } }
          segments.map do |seg|
            points = seg.map { |v, i| [num(x(i) + bucket_w / 2), num(y(v))] }
            if points.size == 1
              Html.tag(:circle, nil, cx: points[0][0], cy: points[0][1], r: 2.5, class: "dot #{s[:css]}")
            else
              d = points.each_with_index.map { |(px, py), k| "#{k.zero? ? "M" : "L"}#{px} #{py}" }.join(" ")
              Html.tag(:path, nil, d: d, class: "line #{s[:css]}")
            end
          end
        end
      end

      def bars
        n = @series.size
        @series.each_with_index.map do |s, k|
          s[:values].each_with_index.filter_map do |v, i|
            next if v.nil?

            w = [bucket_w / n - 1, 1].max
            top = y(v)
            Html.tag(:rect, nil, x: num(x(i) + k * bucket_w / n + 0.5), y: num(top), width: num(w),
                                 height: num(TOP + plot_h - top), class: "bar #{s[:css]}")
          end
        end
      end

      def empty_plot
        Html.tag(:text, "unavailable: no data in this window", x: LEFT + plot_w / 2, y: TOP + plot_h / 2,
                                                               class: "empty", "text-anchor": "middle")
      end

      def legend
        items = @series.map { |s| Html.tag(:span, s[:name], class: "key #{s[:css]}") }
        items << Html.tag(:span, "no data", class: "key gap") if !values.empty? && !gaps.empty?
        Html.tag(:span, items, class: "legend")
      end
    end

    # Horizontal bars for a few labelled values (channel depths).
    class BarList
      def initialize(title:, items:, format: :count)
        @title = title
        @items = items # [[label, value or nil], ...]
        @format = format
      end

      def to_html
        row_h = 22
        label_w = 180
        width = 640
        height = [@items.size, 1].max * row_h + 8
        max = [@items.map { |_, v| v.to_f }.max.to_f, 1].max
        rows = @items.each_with_index.map do |(label, value), i|
          yy = 4 + i * row_h
          bar_w = value.nil? ? 0 : ((width - label_w - 90) * value.to_f / max).round(1)
          [Html.tag(:text, label, x: label_w - 8, y: yy + 15, class: "axis", "text-anchor": "end"),
           (value.nil? ? nil : Html.tag(:rect, nil, x: label_w, y: yy + 3, width: [bar_w, 1].max, height: row_h - 8,
                                                    class: "bar s1")),
           Html.tag(:text, value.nil? ? Format::UNAVAILABLE : Format.public_send(@format, value),
                    x: label_w + bar_w + 6, y: yy + 15, class: value.nil? ? "axis unavailable" : "axis")]
        end
        rows = Html.tag(:text, "no channels", x: width / 2, y: 18, class: "empty", "text-anchor": "middle") if @items.empty?
        Html.tag(:figure, [
          Html.tag(:svg, [Html.tag(:title, @title), rows], class: "chart bars", viewBox: "0 0 #{width} #{height}",
                                                           role: "img", xmlns: "http://www.w3.org/2000/svg",
                                                           "aria-label": @title),
          Html.tag(:figcaption, Html.tag(:strong, @title))
        ], class: "chart")
      end
    end
  end
end
