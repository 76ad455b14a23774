# frozen_string_literal: true

module SolidJobs
  class Web
    # The only way markup is produced. Every value is escaped unless it is
    # already Html::Safe, and only this module creates Safe strings, so a
    # task name, error message or channel read from Redis can never become
    # markup: forgetting to escape is not possible, only marking something
    # Safe is (and that happens here and in Chart, from escaped parts).
    module Html
      class Safe < String
        def to_s = self
      end

      ESCAPES = {"&" => "&amp;", "<" => "&lt;", ">" => "&gt;", '"' => "&quot;", "'" => "&#39;"}.freeze
      VOID = %i[meta link br hr img input].freeze

      module_function

      def escape(value)
        return value if value.is_a?(Safe)

        Safe.new(value.to_s.gsub(/[&<>"']/, ESCAPES))
      end

      # tag(:td, "text", class: "num") => <td class="num">text</td>
      # Content: nil, a String (escaped unless Safe), or an Array of those.
      # Attributes with a nil or false value are left out; true is a bare
      # attribute. Names come from our code, never from data.
      def tag(name, content = nil, **attributes)
        attrs = attributes.filter_map do |k, v|
          next if v.nil? || v == false

          attr_name = k.to_s.tr("_", "-")
          v == true ? " #{attr_name}" : " #{attr_name}=\"#{escape(v)}\""
        end.join
        return Safe.new("<#{name}#{attrs}>") if VOID.include?(name)

        Safe.new("<#{name}#{attrs}>#{join(content)}</#{name}>")
      end

      def join(parts)
        case parts
        when nil then Safe.new
        when Array then Safe.new(parts.map { |p| join(p) }.join)
        else escape(parts)
        end
      end

      # Markup written in our own source (CSS, the refresh script): never data.
      def trusted(source) = Safe.new(source)
    end
  end
end
