# frozen_string_literal: true

module SolidJobs
  class Web
    # Jobs' lifecycles from the journal's job.* entries: one Execution per
    # job id, its events in order, and what they imply (state, attempts,
    # wait and run times). Only the fields listed in FIELDS are kept from an
    # entry's data, so whatever else an entry carried is never shown.
    module Lifecycle
      # Error messages are not among them: they often quote arguments, so
      # the journal does not carry them (docs/observability.md).
      FIELDS = %w[task channel attempt failures error_class error_location reason retry_at_ms latency_ms duration_ms
                  node_id worker_id ractor_id queued_ms created_ms due_ms dead_node_id].freeze
      TERMINAL = %w[completed acknowledged dead].freeze

      Event = Struct.new(:name, :at_ms, :source, :data, keyword_init: true)

      # One job as the journal tells it.
      class Execution
        attr_reader :id, :events

        def initialize(id)
          @id = id
          @events = []
        end

        def fact(key) = @events.reverse_each.lazy.map { |e| e.data[key] }.find { |v| !v.nil? }
        def task = fact("task")
        def channel = fact("channel")
        def state = @events.last&.name
        def first_ms = @events.first&.at_ms
        def last_ms = @events.last&.at_ms
        def node = @events.reverse_each.find { |e| %w[reserved started completed failed].include?(e.name) }&.source
        def at(name) = @events.reverse_each.find { |e| e.name == name }&.at_ms
        def failure = @events.reverse_each.find { |e| e.data["error_class"] }&.data
        def error_class = failure&.fetch("error_class")
        def error_location = failure&.fetch("error_location", nil)

        # The attempt number the journal reports (SolidEngine; on Redis the
        # failure count, from the first failure on), or the starts it saw.
        def attempts
          reported = [fact("attempt"), fact("failures")].grep(Integer).max
          started = @events.count { |e| e.name == "started" }
          [reported, started.positive? ? started : nil].compact.max
        end

        # enqueue (or ready again) -> start of the last attempt.
        def wait_ms
          started = @events.reverse_each.find { |e| e.name == "started" }
          return nil unless started
          return started.data["latency_ms"] if started.data["latency_ms"].is_a?(Numeric)

          ready = @events.reverse_each.find do |e|
            %w[enqueued retry_scheduled recovered].include?(e.name) && e.at_ms <= started.at_ms
          end
          ready && started.at_ms - ready.at_ms
        end

        # start -> completion or failure of the last attempt.
        def run_ms
          finish = @events.reverse_each.find { |e| %w[completed failed].include?(e.name) }
          return nil unless finish
          return finish.data["duration_ms"] if finish.data["duration_ms"].is_a?(Numeric)

          started = @events.reverse_each.find { |e| e.name == "started" && e.at_ms <= finish.at_ms }
          started && finish.at_ms - started.at_ms
        end

        def finished? = TERMINAL.include?(state)
        def started? = @events.any? { |e| %w[started completed failed retry_scheduled dead acknowledged].include?(e.name) }
      end

      module_function

      # entries: decoded journal entries (string keys). Returns executions,
      # most recently active first.
      def executions(entries)
        by_id = {}
        entries.each do |entry|
          name = entry["event"].to_s
          next unless name.start_with?("job.")

          data = entry["data"].is_a?(Hash) ? entry["data"] : {}
          id = data["job_id"] || data["id"]
          next if id.nil?

          (by_id[id.to_s] ||= Execution.new(id.to_s)).events <<
            Event.new(name: name.delete_prefix("job."), at_ms: entry["at_ms"].to_i, source: entry["source"],
                      data: data.slice(*FIELDS))
        end
        by_id.each_value { |x| x.events.replace(x.events.each_with_index.sort_by { |e, i| [e.at_ms, i] }.map(&:first)) }
        by_id.values.sort_by { |x| -x.last_ms.to_i }
      end
    end
  end
end
