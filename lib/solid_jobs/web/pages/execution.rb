# frozen_string_literal: true

module SolidJobs
  class Web
    module Pages
      # One job: its current record (Console) and its lifecycle in the
      # journal, as a timeline of waits and runs.
      class Execution < Page
        TITLE = "Execution"

        def heading = "Execution #{@params[:id]}"
        def nav_path = "/executions"
        def status = found? ? 200 : 404

        def body
          unless found?
            return [tag(:p, "Unknown job id #{@params[:id]}: not waiting, running, retrying or archived, not among the " \
                            "newest #{Format.count(Console::COMPLETED_KEPT)} completions, on no SolidEngine backend " \
                            "(which remember completed jobs for their completed_retention_ms), and not in the journal " \
                            "entries read. It was never enqueued here, or finished longer ago than those records reach.",
                        class: "note"), back]
          end

          [facts_section, timeline_section, back]
        end

        def to_h
          {
            "page" => "execution", "now_ms" => now_ms, "id" => @params[:id], "found" => found?,
            "record" => json_value(record),
            "journal" => execution && Executions.summary(execution),
            "events" => execution&.events&.map { |e| {"event" => e.name, "at_ms" => e.at_ms, "source" => e.source}.merge(e.data) }
          }
        end

        private

        def record = snapshot.job(@params[:id])

        def execution
          return @execution if defined?(@execution)

          journal = snapshot.journal
          @execution = unavailable?(journal) ? nil : Lifecycle.executions(journal).find { |x| x.id == @params[:id] }
        end

        def found? = !execution.nil? || (record && !unavailable?(record))

        def back = tag(:p, link("/executions", "← recent executions"))

        def facts_section
          r = record
          current = if unavailable?(r) then Format.unavailable(r.reason)
                    elsif r.nil? then tag(:span, "not in the keyspace (finished, or never written)", class: "muted")
                    elsif r["retained"] == false then [state(r["state"]), " ", not_retained(r)]
                    else state(r["state"])
                    end
          x = execution
          section("Job", facts([
            ["Id", tag(:code, @params[:id])],
            ["Task", pick(r, "task") || x&.task || Format.unavailable],
            ["Channel", pick(r, "channel") || x&.channel || Format.unavailable],
            ["State now", current],
            ["Last journaled event", x ? state(x.state) : Format.unavailable("no journal entries for this job")],
            ["Attempts", Format.count(x&.attempts)],
            ["Failures recorded", pick(r, "failures") ? Format.count(pick(r, "failures")) : tag(:span, "none", class: "muted")],
            ["Backend", pick(r, "backend") || Format.unavailable],
            *unique_fact(pick(r, "unique")),
            ["Waited (last attempt)", Format.ms(x&.wait_ms)],
            ["Ran (last attempt)", Format.ms(x&.run_ms)],
            ["Error", error(x, r)]
          ]))
        end

        def pick(r, key) = r.is_a?(Hash) ? r[key] : nil

        # A unique job's lock (docs/unique.md), when its envelope was read.
        def unique_fact(u)
          return [] unless u.is_a?(Hash)

          held = u["held"] ? "held by this job" : tag(:span, "released", class: "muted")
          [["Unique lock", [tag(:code, u["lock"].to_s), " while: #{u["while"]}, ", held]]]
        end

        # Console.find's "completed and no longer retained".
        def not_retained(r)
          tag(:span, "no longer retained: its records were removed when it completed " \
                     "(#{Format.count(r["completions_since"])} jobs completed since)", class: "muted")
        end

        # Class and location only: messages often quote arguments.
        def error(x, r)
          klass = x&.error_class || pick(r, "error_class")
          return tag(:span, "none recorded", class: "muted") unless klass

          location = x&.error_location
          [tag(:code, klass), location ? [" at ", tag(:code, location)] : nil]
        end

        def timeline_section
          x = execution
          return section("Lifecycle", tag(:p, "No journal entries for this job (unavailable).", class: "note")) unless x

          start = x.first_ms
          rows = x.events.each_cons(2).map { |a, b| [a, b.at_ms - a.at_ms] } + [[x.events.last, nil]]
          section("Lifecycle", timeline(x), table(
            [["Event"], ["At"], ["+ since first", "num"], ["Until next", "num"], ["Source"], ["Detail"]],
            rows.map do |e, until_next|
              [state(e.name), Format.time(e.at_ms), Format.ms(e.at_ms - start), until_next ? Format.ms(until_next) : "—",
               source_name(e.source), detail(e)]
            end,
            empty: "No events."
          ))
        end

        def detail(event)
          d = event.data
          parts = []
          parts << "attempt #{d["attempt"]}" if d["attempt"]
          parts << "retry at #{Format.time(d["retry_at_ms"])}" if d["retry_at_ms"]
          parts << [d["error_class"], d["error_location"]].compact.join(" at ") if d["error_class"]
          parts << "failure #{d["failures"]}" if d["failures"]
          parts << "waited #{Format.ms(d["latency_ms"])}" if d["latency_ms"]
          parts << "ran #{Format.ms(d["duration_ms"])}" if d["duration_ms"]
          parts << "worker #{d["worker_id"]}" if d["worker_id"]
          parts << "from dead node #{Format.short_id(d["dead_node_id"])}" if d["dead_node_id"]
          parts << d["reason"].to_s if d["reason"]
          parts.join(" · ")
        end

        # A horizontal bar over the job's lifetime: waiting (light), running
        # (dark), failed attempts (red), with a tick per event.
        # The wait before the first journaled event is drawn from the time
        # the job became ready (`queued_ms` on job.reserved), when known.
        def timeline(x)
          width = 640
          left = 10
          ready = x.events.find { |e| e.name == "reserved" }&.data&.fetch("queued_ms", nil)
          origin = ready.is_a?(Integer) && ready < x.first_ms ? ready : x.first_ms
          span = [x.last_ms - origin, 1].max
          px = ->(ms) { (left + (ms - origin) * (width - 2 * left).to_f / span).round(1) }
          waited = if origin < x.first_ms
                     Html.tag(:rect, nil, x: px.(origin), y: 14, width: [px.(x.first_ms) - px.(origin), 1].max, height: 16,
                                          class: "wait")
                   end
          segments = [waited] + x.events.each_cons(2).filter_map do |a, b|
            css = case a.name
                  when "started" then b.name == "failed" ? "fail" : "span"
                  when "enqueued", "journaled", "reserved", "retry_scheduled", "recovered" then "wait"
                  end
            next unless css

            Html.tag(:rect, nil, x: px.(a.at_ms), y: 14, width: [px.(b.at_ms) - px.(a.at_ms), 1].max, height: 16, class: css)
          end
          ticks = x.events.map do |e|
            Html.tag(:line, nil, x1: px.(e.at_ms), x2: px.(e.at_ms), y1: 10, y2: 34, class: "grid")
          end
          Html.tag(:figure, [
            Html.tag(:svg, [Html.tag(:title, "Lifecycle of #{x.id}"), segments, ticks,
                            Html.tag(:text, "0", x: left, y: 48, class: "axis"),
                            Html.tag(:text, Format.ms(span), x: width - left, y: 48, class: "axis", "text-anchor": "end")],
                     class: "chart timeline", viewBox: "0 0 #{width} 54", role: "img", xmlns: "http://www.w3.org/2000/svg",
                     "aria-label": "Lifecycle timeline"),
            Html.tag(:figcaption, Html.tag(:span, [Html.tag(:span, "waiting", class: "key wait"),
                                                   Html.tag(:span, "running", class: "key s1"),
                                                   Html.tag(:span, "failed attempt", class: "key s2")], class: "legend"))
          ], class: "chart")
        end
      end
    end
  end
end
