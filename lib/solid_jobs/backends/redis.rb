# frozen_string_literal: true

module SolidJobs
  module Backends
    # The default backend: Redis, with the keyspace of docs/keyspace.md.
    class Redis < Base
      # lease_extension: claims do not expire while their node heartbeats, so
      # there is nothing to extend.
      CAPABILITIES = {
        at_least_once: true, retries: true, scheduling: true, crash_recovery: true, deduplication: true,
        fencing: true, lease_extension: false, get: true, cancel: true, durability: true
      }.freeze

      attr_reader :client

      def initialize(name, spec, config)
        super
        url = spec[:url] || config.redis_url
        @namespace = config.namespace
        @client = Ractor.make_shareable(Native::Client.new(url, config.namespace))
      end

      def capabilities = CAPABILITIES

      def push(task, argument_lists, channel, max_failures, due_ms)
        return [@client.push(task, argument_lists.first, channel, max_failures, due_ms)] if argument_lists.size == 1

        @client.push_many(task, argument_lists, channel, max_failures, due_ms)
      end

      def push_envelopes(envelopes, due_ms) = @client.push_envelopes(envelopes, due_ms)

      # {"id", "state", "channel", "envelope"} or nil. State: ready, planned,
      # retrying, claimed, cancelled or archived; completed jobs are not kept.
      # The envelope is included when it is found without a scan (claimed,
      # archived).
      def get_job(id)
        state, channel, raw = @client.job_state(id.to_s)
        return nil unless state

        envelope = begin
          raw && Native.decode_envelope(raw)
        rescue EnvelopeError
          nil
        end
        {"id" => id.to_s, "state" => state, "channel" => channel, "envelope" => envelope}
      end

      # true when a waiting job (ready, planned or retrying) was cancelled: it
      # is dropped, never run, when a worker meets it.
      def cancel(id) = @client.cancel(id.to_s)

      def recover = 0 # every worker node recovers dead nodes on each heartbeat

      def source_spec(channels, config:, node_id:, description:)
        c = config
        ["redis", @client.url, @namespace, node_id, channels.map(&:dup), c.channel_order.to_s, c.prefetch || 0, c.concurrency,
         c.heartbeat_interval.to_f, c.recovery_delay.to_f, description, c.archive_max_entries, c.archive_max_age.to_f]
      end
    end
  end
end
