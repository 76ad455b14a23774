# frozen_string_literal: true

module SolidJobs
  class Web
    # A dashboard page: #body renders the HTML inside <main>, #to_h the same
    # facts as JSON. Both read only the Snapshot and pick the fields they
    # show, which is why job arguments cannot appear: no page asks for them.
    class Page
      TITLE = "Page"

      def initialize(snapshot, params = {}, base: "")
        @snapshot = snapshot
        @params = params
        @base = base
      end

      def status = 200
      def title = self.class::TITLE
      def heading = title
      def now_ms = @snapshot ? @snapshot.now_ms : Clock.now_ms
      def nav_path = Router::PAGES.key(self.class)

      private

      attr_reader :snapshot

      def tag(...) = Html.tag(...)
      def href(path) = "#{@base}#{path}"
      def link(path, text) = tag(:a, text, href: href(path))

      # Anything read from Redis may be Snapshot::Unavailable: shown as
      # "unavailable" with the reason, never as an empty list or a zero.
      def unavailable?(value) = value.is_a?(Snapshot::Unavailable)

      def unavailable_note(value)
        tag(:p, [Format.unavailable(value.reason), " — ", value.reason], class: "note")
      end

      def section(title, *content, id: nil)
        tag(:section, [tag(:h2, title), content], id: id)
      end

      def tiles(pairs)
        tag(:div, pairs.map do |label, value, css|
          tag(:div, [tag(:div, label, class: "label"), tag(:div, value, class: "value")], class: ["tile", css].compact.join(" "))
        end, class: "tiles")
      end

      # columns: [[label, css], ...]; rows: arrays of cell content.
      def table(columns, rows, empty:)
        columns = columns.map { |c| Array(c) }
        head = tag(:thead, tag(:tr, columns.map { |label, css| tag(:th, label, class: css, scope: "col") }))
        body = if rows.empty?
                 tag(:tr, tag(:td, empty, colspan: columns.size, class: "muted"))
               else
                 rows.map { |row| tag(:tr, row.each_with_index.map { |cell, i| tag(:td, cell, class: columns[i][1]) }) }
               end
        tag(:table, [head, tag(:tbody, body)])
      end

      def facts(pairs)
        tag(:dl, pairs.map { |k, v| [tag(:dt, k), tag(:dd, v)] }, class: "facts")
      end

      def state(name)
        name.nil? ? Format.unavailable : tag(:span, name, class: "state #{name.to_s.gsub(/[^a-z_]/, "")}")
      end

      # How old an observation is, marked stale when it is.
      def freshness(age_ms, fresh)
        return Format.unavailable("never observed") if age_ms.nil?

        fresh == false ? tag(:span, "stale: #{Format.age(age_ms)}", class: "stale") : Format.age(age_ms)
      end

      # Whether an observation part holds values: a part never observed is
      # missing or {"state" => "unavailable"}.
      def observed?(part) = part.is_a?(Hash) && part["state"] != "unavailable"

      # A value, formatted; nil as "unavailable".
      def shown(value, format = nil)
        return Format.unavailable if value.nil?

        format ? Format.public_send(format, value) : value
      end

      # An observation part ("process", "redis", ...) of a node: its age,
      # as reported with it or from its at_ms.
      def part_age(part)
        return nil unless part.is_a?(Hash)
        return part["age_ms"] if part["age_ms"].is_a?(Numeric)

        part["at_ms"].is_a?(Numeric) ? now_ms - part["at_ms"] : nil
      end

      # Observations says whether each part is fresh; for a part that does
      # not say, the same rule (Observations.fresh?).
      def part_freshness(part)
        return Format.unavailable("never observed") unless observed?(part) || part.is_a?(Array)

        part = part.first || {} if part.is_a?(Array)
        age = part_age(part)
        fresh = if part.key?("fresh") then part["fresh"]
                elsif part["stale"] then false
                else age.nil? || Observations.fresh?(age)
                end
        freshness(age, fresh)
      end

      # A journal source as a person knows it: host:pid for a live node,
      # else the first characters of its id.
      def source_name(source)
        return "" if source.nil?

        @source_names ||= begin
          nodes = @snapshot&.nodes
          nodes.is_a?(Array) ? nodes.to_h { |n| [n["node_id"], node_label(n)] } : {}
        end
        @source_names[source] || (source.start_with?("publisher:") ? source.split(":")[1, 2].join(":") : Format.short_id(source))
      end

      def node_label(n)
        node = n["node"].is_a?(Hash) ? n["node"] : {}
        node["hostname"] ? "#{node["hostname"]}:#{node["pid"]}" : Format.short_id(n["node_id"])
      end

      def job_link(id) = link("/executions/#{id}", tag(:code, Format.short_id(id)))

      # For JSON: Unavailable becomes {"unavailable": reason}.
      def json_value(value)
        unavailable?(value) ? {"unavailable" => value.reason} : value
      end
    end
  end
end
