# frozen_string_literal: true

require "securerandom"
require "socket"

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
        @barrier_ttl_ms = (config.publication_barrier_ttl * 1000).round
        client = Native::Client.new(url, config.namespace)
        client.enable_telemetry([Socket.gethostname, config.telemetry, config.telemetry_sample_rate,
                                 PUBLISHER_BUFFER, config.telemetry_journal_size])
        @client = Ractor.make_shareable(client)
        # Adapter claims belong to a node of their own, registered for one
        # recovery delay at each claim: a claim not settled within it is
        # recovered by the workers, like any dead node's.
        @adapter_node = "adapter-#{SecureRandom.uuid}"
        @claim_ttl_ms = (config.recovery_delay * 1000).round
      end

      # Journal entries a producer process buffers between flushes.
      PUBLISHER_BUFFER = 10_000

      def capabilities = CAPABILITIES

      # This process's journal source (publisher:<host>:<pid>:<id>).
      def telemetry_source = @client.telemetry_source

      # Writes envelopes behind the publication barrier; returns what
      # release_held takes (docs/observability.md).
      def hold_envelopes(envelopes, due_ms) = @client.hold_envelopes(envelopes, due_ms, @barrier_ttl_ms).map(&:last)

      def release_held(members) = @client.release_held(members)

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

        envelope = raw && decode(raw)
        {"id" => id.to_s, "state" => state, "channel" => channel, "envelope" => envelope}
      end

      # true when a waiting job (ready, planned or retrying) was cancelled: it
      # is dropped, never run, when a worker meets it.
      def cancel(id) = @client.cancel(id.to_s)

      def claim(channel)
        token, raw = @client.claim(@adapter_node, channel.to_s, @claim_ttl_ms)
        return nil unless token

        envelope = decode(raw)
        Claim.new(job_id: envelope["id"], channel: channel.to_s, envelope: envelope, reservation: @adapter_node, fence: token,
                  raw: raw)
      end

      def ack(claim) = settle(claim, "ack", "")
      def retry_job(claim, delay:) = settle(claim, "retry", (delay * 1000).round.to_s)
      def fail_job(claim, reason: "failed") = settle(claim, "fail", reason.to_s)

      # Moves the claims of every node whose heartbeat expired back to their
      # channels now (worker nodes also do this on each heartbeat); returns
      # the number of jobs requeued.
      def recover = @client.recover

      private def settle(claim, action, arg)
        @client.settle(claim.reservation, claim.fence, claim.channel, claim.raw, action, arg)
        true
      end

      def source_spec(channels, config:, node_id:, description:)
        c = config
        ["redis", @client.url, @namespace, node_id, channels.map(&:dup), c.channel_order.to_s, c.prefetch || 0, c.concurrency,
         c.heartbeat_interval.to_f, c.recovery_delay.to_f, description, c.archive_max_entries, c.archive_max_age.to_f]
      end
    end
  end
end
