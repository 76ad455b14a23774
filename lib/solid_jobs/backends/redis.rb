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
        fencing: true, lease_extension: false, get: true, cancel: true, durability: true, unique: true,
        recurring: true, pause: true, concurrency_limits: true, priority: true, rate_limits: true
      }.freeze

      attr_reader :client

      def initialize(name, spec, config)
        super
        url = spec[:url] || config.redis_url
        @namespace = config.namespace
        @barrier_ttl_ms = (config.publication_barrier_ttl * 1000).round
        # enqueue_unique.lua counts an archived :until_done holder only this long.
        @archive_max_age_ms = (config.archive_max_age * 1000).round
        client = Native::Client.new(url, config.namespace, config.timeouts)
        client.enable_telemetry({hostname: Socket.gethostname, journal: config.telemetry,
                                 sample_per_interval: config.telemetry_sample_rate, buffer: PUBLISHER_BUFFER,
                                 journal_size: config.telemetry_journal_size})
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

      # A unique task's jobs (docs/unique.md): [ids, duplicate indexes].
      # `job`: {task:, channel:, max_failures:, due_ms:, mode:, for_ms:, flow:}.
      # `job[:flow]`: nil, or a concurrency limited task's [group, limit,
      # [key material, ...]] (docs/flow-control.md).
      def push_unique(job, argument_lists, materials)
        @client.push_unique(job[:task], argument_lists, materials, job[:channel], job[:max_failures], job[:due_ms],
                            [job[:mode], job[:for_ms], @archive_max_age_ms], job[:flow])
      end

      # A concurrency limited task's jobs, each with its meta.flow.
      # `job`: {task:, channel:, max_failures:, due_ms:, flow:}.
      def push_limited(job, argument_lists)
        @client.push_limited(job[:task], argument_lists, job[:channel], job[:max_failures], job[:due_ms], job[:flow])
      end

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
      # is dropped, never run, when a worker meets it. false when the id is
      # unknown, completed or already cancelled; JobRunning when the job is
      # claimed (running), which changes nothing. The same on SolidEngine.
      def cancel(id) = @client.cancel(id.to_s)

      def claim(channel)
        token, raw = @client.claim(@adapter_node, channel.to_s, @claim_ttl_ms)
        return nil unless token

        envelope = decode(raw)
        Claim.new(job_id: envelope["id"], channel: channel.to_s, envelope: envelope, reservation: @adapter_node, fence: token,
                  raw: raw)
      end

      def ack(claim)
        @client.settle_ack(*settle_target(claim))
        true
      end

      def retry_job(claim, delay:)
        @client.settle_retry(*settle_target(claim), milliseconds(delay))
        true
      end

      # Archives the job as discarded, with `reason`.
      def fail_job(claim, reason: "failed")
        @client.settle_discard(*settle_target(claim), reason.to_s)
        true
      end

      # Moves the claims of every node whose heartbeat expired back to their
      # channels now (worker nodes also do this on each heartbeat); returns
      # the number of jobs requeued.
      def recover = @client.recover

      # Pausing channels (docs/flow-control.md): every node's next claim skips
      # a paused channel; enqueue still writes to it. Resume rings the
      # doorbell when the channel holds ready jobs.
      def pause_channel(channel, by: nil) = @client.pause_channel(channel.to_s, by&.to_s)
      def resume_channel(channel) = @client.resume_channel(channel.to_s)

      def paused_channels
        @client.paused_channels.to_h { |name, ms, by| [name, {"paused_ms" => ms, "by" => by}] }
      end

      private def settle_target(claim) = [claim.reservation, claim.fence, claim.channel, claim.raw]

      def source_spec(channels, config:, node_id:, description:)
        c = config
        {kind: "redis", url: @client.url, namespace: @namespace, node_id: node_id, channels: channels.map(&:dup),
         channel_order: c.channel_order.to_s, prefetch: c.prefetch, workers: c.concurrency,
         heartbeat_interval: c.heartbeat_interval.to_f, node_ttl: c.recovery_delay.to_f, description: description,
         archive_max_entries: c.archive_max_entries, archive_max_age: c.archive_max_age.to_f, timeouts: c.timeouts}
      end
    end
  end
end
