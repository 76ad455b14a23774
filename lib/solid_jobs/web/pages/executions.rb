# frozen_string_literal: true

module SolidJobs
  class Web
    module Pages
      # The most recently active jobs in the journal, with state, attempts,
      # and wait and run times. Only what the journal recorded: when the
      # data side samples per-job entries, a job may be missing here.
      class Executions < Page
        TITLE = "Executions"
        LIMIT = 100

        def body
          journal = snapshot.journal
          return [unavailable_note(journal)] if unavailable?(journal)

          [
            tag(:p, "The #{LIMIT} most recently active jobs in the newest #{Format.count(journal.size)} journal entries, " \
                    "each with the last event journaled for it. Busy producers and nodes journal a sample of their jobs " \
                    "(each on its own), so a job may be missing or show only its enqueue; counts on the Overview are exact. " \
                    "A job's page shows its current state.",
                class: "note"),
            table(
              [["Job"], ["Task"], ["Channel"], ["Last event"], ["Attempts", "num"], ["Waited", "num"], ["Ran", "num"],
               ["At"], ["Node"], ["Error"]],
              executions.map do |x|
                [job_link(x.id), x.task || Format.unavailable, x.channel ? tag(:code, x.channel) : Format.unavailable,
                 state(x.state), timing(x, x.attempts, :count), timing(x, x.wait_ms, :ms), timing(x, x.run_ms, :ms),
                 "#{Format.clock(x.last_ms)} (#{Format.age(now_ms - x.last_ms)})", source_name(x.node),
                 error(x)]
              end,
              empty: "No job events in the journal."
            )
          ]
        end

        def to_h
          journal = snapshot.journal
          return {"page" => "executions", "now_ms" => now_ms, "executions" => json_value(journal)} if unavailable?(journal)

          {"page" => "executions", "now_ms" => now_ms, "executions" => executions.map { |x| self.class.summary(x) }}
        end

        def self.summary(x)
          {"id" => x.id, "task" => x.task, "channel" => x.channel, "state" => x.state, "attempts" => x.attempts,
           "wait_ms" => x.wait_ms, "run_ms" => x.run_ms, "first_ms" => x.first_ms, "last_ms" => x.last_ms,
           "node" => x.node, "error_class" => x.error_class, "error_location" => x.error_location}
        end

        private

        def executions = @executions ||= Lifecycle.executions(snapshot.journal).first(LIMIT)

        # A job that has not started yet has no attempt and no times ("—");
        # one that did but whose entries do not say is "unavailable".
        def timing(x, value, format)
          return Format.public_send(format, value) unless value.nil?

          return Format.unavailable("not in the journal entries read") if x.started?

          tag(:span, "—", class: "muted", title: "not started")
        end

        def error(x)
          return "" unless x.error_class

          [tag(:code, x.error_class), x.error_location ? [" at ", tag(:code, x.error_location)] : nil]
        end
      end
    end
  end
end
