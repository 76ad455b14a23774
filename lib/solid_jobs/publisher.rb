# frozen_string_literal: true

module SolidJobs
  # Turns `Task.enqueue` calls into envelopes in Redis.
  #
  # Without publication interceptors, arguments go straight to the native
  # client, which validates, encodes and writes them in one round trip.
  # With interceptors, each envelope is built first (as a Hash), passed
  # through the chain, and the surviving envelopes are written together.
  module Publisher
    # What publication interceptors receive. `envelope` is the Hash that will
    # be written; an interceptor may change it or not yield to skip the job.
    class Publication
      attr_reader :task_class, :envelope, :due_ms

      def initialize(task_class, envelope, due_ms)
        @task_class = task_class
        @envelope = envelope
        @due_ms = due_ms
      end
    end

    module_function

    def now_ms
      Process.clock_gettime(Process::CLOCK_REALTIME, :millisecond)
    end

    # Returns the ids of the written jobs (nil where an interceptor skipped one).
    # `channel` replaces the task's own (Active Job's queue_name, the warm
    # pool's target task), `max_failures` likewise.
    def publish(task_class, argument_lists, due_ms: nil, channel: nil, max_failures: nil)
      task = task_class.name or raise ArgumentError, "an anonymous class cannot be a task: give it a constant name"
      options = task_class.solid_jobs_options
      channel ||= options.fetch(:channel)
      max_failures ||= options.fetch(:max_failures)
      return Testing.publish(task_class, argument_lists, channel, max_failures, due_ms) if Testing.active?

      routing = SolidJobs.routing
      backend = routing.backend_for(channel)
      check_supported(backend, task, options)
      chain = SolidJobs.config.publish_interceptors
      return backend.push(task, argument_lists, channel, max_failures, due_ms) if chain.empty?

      envelopes = argument_lists.map { |args| Native::Client.build(task, args, channel, max_failures, due_ms) }
      kept = envelopes.map do |envelope|
        publication = Publication.new(task_class, envelope, due_ms)
        written = nil
        chain.invoke(publication) { written = publication.envelope }
        written
      end
      kept.compact.group_by { |e| routing.backend_for(e["channel"]) }.each { |b, list| b.push_envelopes(list, due_ms) }
      kept.map { |envelope| envelope && envelope["id"] }
    end

    # retry_within needs the time of the first failure, which only the
    # Redis backend records: refuse at enqueue rather than ignore it later.
    def check_supported(backend, task, options)
      return unless options[:retry_within] && !backend.is_a?(Backends::Redis)

      raise Backends::NotSupported, "#{task} uses retry_within, which the #{backend.name.inspect} backend cannot honor " \
                                    "(it does not record failure times); remove it or route the channel to Redis"
    end
  end
end
