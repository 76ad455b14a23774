# frozen_string_literal: true

module SolidJobs
  class Web
    module Pages
      # Jobs given up: the Redis archive, newest first, filtered by task,
      # error class and channel (query parameters) and paginated with a
      # cursor; and each SolidEngine backend's dead jobs. Envelope metadata
      # only (Snapshot::JOB_FIELDS): never arguments, messages or
      # backtraces.
      class Archive < Page
        TITLE = "Archive"
        FILTERS = %w[task error_class channel].freeze
        PAGE_SIZES = [25, 50, 100].freeze

        def body
          [filter_form, redis_section, engine_sections]
        end

        def to_h
          page = redis_page
          {
            "page" => "archive", "now_ms" => now_ms, "filters" => filters, "limit" => limit,
            "archived" => json_value(snapshot.counts["archived"]),
            "entries" => unavailable?(page) ? json_value(page) : page.entries,
            "next_cursor" => unavailable?(page) ? nil : page.next_cursor,
            "scanned" => unavailable?(page) ? nil : page.scanned,
            "engines" => snapshot.engine_backends.map do |b|
              {"backend" => b.name.to_s, "dead" => json_value(snapshot.engine_dead(b.name, **filter_args))}
            end
          }
        end

        private

        def query = @params[:query] || {}

        # Exact names, as recorded; an empty field is no filter.
        def filters
          FILTERS.to_h { |k| [k, query[k].to_s.strip[0, 200]] }.reject { |_, v| v.empty? }
        end

        def filter_args = filters.transform_keys(&:to_sym)

        def limit
          n = query["limit"].to_i
          PAGE_SIZES.include?(n) ? n : PAGE_SIZES[1]
        end

        def cursor
          c = query["cursor"].to_s
          SolidJobs::Archive::CURSOR.match?(c) ? c : nil
        end

        def redis_page
          @redis_page ||= snapshot.archive_page(**filter_args, cursor: cursor, limit: limit)
        end

        def filter_form
          tag(:form, [
            FILTERS.map do |name|
              tag(:label, [name.tr("_", " ").capitalize, " ",
                           tag(:input, nil, type: "text", name: name, value: filters[name], size: 22,
                                            placeholder: name == "error_class" ? "e.g. ArgumentError" : nil)])
            end,
            tag(:input, nil, type: "hidden", name: "limit", value: limit.to_s),
            tag(:button, "Filter", type: "submit"),
            filters.empty? ? nil : link("/archive", "clear filters")
          ], method: "get", action: href("/archive"), class: "filters", role: "search", "aria-label": "Filter the archive")
        end

        def redis_section
          page = redis_page
          return section("Redis archive", unavailable_note(page)) if unavailable?(page)

          archived = snapshot.counts["archived"]
          section("Redis archive", [
            tag(:p, [
              "#{unavailable?(archived) ? "?" : Format.count(archived)} archived in all, newest first",
              filters.empty? ? "" : "; #{Format.count(page.scanned)} examined for this page (at most " \
                                    "#{Format.count(SolidJobs::Archive::PAGE_SCAN_MAX)} per page)",
              cursor ? "; continuing after an earlier page" : "",
              ". The archive is capped (archive_max_entries, archive_max_age)."
            ], class: "note"),
            table(
              [["Job"], ["Task"], ["Channel"], ["Reason"], ["Error class"], ["Failures", "num"], ["Archived"]],
              page.entries.map do |r|
                [job_link(r["id"]), r["task"] || Format.unavailable("not decodable"),
                 r["channel"] ? tag(:code, r["channel"]) : "", r["reason"].to_s,
                 r["error_class"] ? tag(:code, r["error_class"]) : "", Format.count(r["failures"]),
                 r["discarded_ms"] ? "#{Format.time(r["discarded_ms"])} (#{Format.age(now_ms - r["discarded_ms"])})" : ""]
              end,
              empty: filters.empty? ? "The archive is empty." : "No archived job matches in the entries examined."
            ),
            pager(page)
          ], id: "redis-archive")
        end

        def pager(page)
          links = []
          links << link(page_path(nil), "← newest") if cursor
          links << link(page_path(page.next_cursor), "older →") if page.next_cursor
          links.empty? ? nil : tag(:p, links.flat_map { |l| [l, " "] }, class: "pager")
        end

        def page_path(next_cursor)
          params = filters.merge("limit" => limit.to_s)
          params["cursor"] = next_cursor if next_cursor
          "/archive?#{URI.encode_www_form(params)}"
        end

        def engine_sections
          snapshot.engine_backends.map do |backend|
            dead = snapshot.engine_dead(backend.name, **filter_args)
            title = ["SolidEngine ", tag(:code, backend.name.to_s), ": dead jobs"]
            next section(title, unavailable_note(dead)) if unavailable?(dead)

            section(title, [
              tag(:p, "The engine's dead list, newest first: the newest 100 read (the engine keeps its newest " \
                      "dead_max, and records no time of death). Reason and error class only.", class: "note"),
              table(
                [["Job"], ["Task"], ["Channel"], ["Reason"], ["Error class"], ["Attempts", "num"]],
                dead.map do |r|
                  [job_link(r["id"]), r["task"] || Format.unavailable("not decodable"),
                   r["channel"] ? tag(:code, r["channel"]) : "", r["reason"] || Format.unavailable("not recorded"),
                   r["error_class"] ? tag(:code, r["error_class"]) : "", Format.count(r["attempts"])]
                end,
                empty: filters.empty? ? "No dead job." : "No dead job matches."
              )
            ])
          end
        end
      end
    end
  end
end
