# frozen_string_literal: true

module SolidJobs
  class Web
    module Pages
      # The search box's answer (`/search?q=`). A job id known anywhere
      # (Redis in any state, the completed-ids list, SolidEngine, the
      # journal) redirects to the job's page; anything else is taken as a
      # task name: that task's jobs in the journal, the archive and the
      # engines' dead lists, each read bounded, and the task names that
      # contain the text.
      class Search < Page
        TITLE = "Search"
        # The JSON twin's and the page's bounds per list.
        LIMIT = 50
        QUERY_MAX = 200

        def nav_path = nil
        def heading = q.empty? ? "Search" : "Search: #{q}"

        # The text searched for (the layout's search box shows it again).
        def query_text = q

        # The job's page, when the query names a job.
        def redirect = job_found? ? "/executions/#{q}" : nil

        def body
          return tag(:p, "Type a job id or a task name in the search box.", class: "note") if q.empty?

          [
            job_note,
            section("Tasks whose name contains #{q.inspect}", task_names_list),
            # A task's jobs for a task name as written; for part of a name,
            # the names above lead there.
            exact_task? ? section(["Jobs of task ", tag(:code, q), " in the journal"], journal_table) : nil,
            exact_task? ? section(["Archived jobs of task ", tag(:code, q)], archive_table) : nil
          ]
        end

        def to_h
          {
            "page" => "search", "now_ms" => now_ms, "query" => q,
            "job" => job_id? ? json_value(record) : nil,
            "job_path" => redirect,
            "tasks" => json_value(task_names),
            "journal" => unavailable?(journal_jobs) ? json_value(journal_jobs) : journal_jobs.map { |x| Executions.summary(x) },
            "archived" => unavailable?(archived) ? json_value(archived) : archived,
            "next_cursor" => unavailable?(archive_page) ? nil : archive_page.next_cursor
          }
        end

        private

        def q = @q ||= (@params[:query] || {})["q"].to_s.strip[0, QUERY_MAX]

        def job_id? = Router::JOB_ID.match?("/executions/#{q}")

        def record = job_id? ? snapshot.job(q) : nil

        def job_found?
          return false unless job_id?

          r = record
          (r.is_a?(Hash) && !unavailable?(r)) || journal_execution?
        end

        def journal_execution?
          journal = snapshot.journal
          !unavailable?(journal) && Lifecycle.executions(journal).any? { |x| x.id == q }
        end

        # A known task name, or a name no task contains (then the lists say
        # that nothing of it is found, rather than nothing at all).
        def exact_task?
          names = task_names
          unavailable?(names) || names.include?(q) || names.empty?
        end

        UUID = /\A\h{8}-\h{4}-\h{4}-\h{4}-\h{12}\z/

        # Said for what looks like a job id (a UUID), or when nothing else matched.
        def job_note
          return nil unless job_id? && (UUID.match?(q) || task_names_empty?)

          r = record
          text = if unavailable?(r) then ["Looking ", tag(:code, q), " up as a job id failed: ", Format.unavailable(r.reason)]
                 else ["No job ", tag(:code, q), " is known (", unknown_reason, "); searching for it as a task name."]
                 end
          tag(:p, text, class: "note")
        end

        def unknown_reason
          "not waiting, running, retrying or archived, not among the newest " \
            "#{Format.count(Console::COMPLETED_KEPT)} completions, not in the journal read"
        end

        def task_names_empty?
          names = task_names
          !unavailable?(names) && names.empty?
        end

        def task_names
          @task_names ||= begin
            needle = q.downcase
            names = snapshot.task_names
            unavailable?(names) ? names : names.select { |n| n.downcase.include?(needle) }.first(LIMIT)
          end
        end

        def task_names_list
          names = task_names
          return unavailable_note(names) if unavailable?(names)
          if names.empty?
            return tag(:p, "No task name known to the nodes, publishers or the archive contains it.", class: "muted")
          end

          tag(:ul, names.map { |n| tag(:li, link("/search?#{URI.encode_www_form("q" => n)}", n)) })
        end

        def journal_jobs
          @journal_jobs ||= begin
            journal = snapshot.journal
            unavailable?(journal) ? journal : Lifecycle.executions(journal).select { |x| x.task == q }.first(LIMIT)
          end
        end

        def journal_table
          jobs = journal_jobs
          return unavailable_note(jobs) if unavailable?(jobs)

          [tag(:p, "The #{LIMIT} most recently active, from the journal entries read (busy nodes journal a sample).",
               class: "note"),
           table([["Job"], ["Channel"], ["Last event"], ["Attempts", "num"], ["At"], ["Error"]],
                 jobs.map do |x|
                   [job_link(x.id), x.channel ? tag(:code, x.channel) : "", state(x.state), Format.count(x.attempts),
                    "#{Format.clock(x.last_ms)} (#{Format.age(now_ms - x.last_ms)})",
                    x.error_class ? tag(:code, x.error_class) : ""]
                 end,
                 empty: "No job of this task in the journal entries read.")]
        end

        def archive_page = @archive_page ||= snapshot.archive_page(task: q, limit: LIMIT)

        def archived
          page = archive_page
          unavailable?(page) ? page : page.entries
        end

        def archive_table
          page = archive_page
          return unavailable_note(page) if unavailable?(page)

          more = page.next_cursor ? [" ", link("/archive?#{URI.encode_www_form("task" => q)}", "all on the Archive page")] : nil
          [table([["Job"], ["Channel"], ["Reason"], ["Error class"], ["Archived"]],
                 page.entries.map do |r|
                   [job_link(r["id"]), r["channel"] ? tag(:code, r["channel"]) : "", r["reason"].to_s,
                    r["error_class"] ? tag(:code, r["error_class"]) : "", Format.time(r["discarded_ms"])]
                 end,
                 empty: "No archived job of this task in the newest #{Format.count(page.scanned)} entries."),
           tag(:p, ["Newest first, #{Format.count(page.scanned)} archive entries examined.", more], class: "note")]
        end
      end
    end
  end
end
