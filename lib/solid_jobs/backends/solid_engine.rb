# frozen_string_literal: true

module SolidJobs
  module Backends
    # SolidEngine, our job server (docs/protocol.md), over `unix://` or
    # `tcp://`. Channels map to engine channel ids by CRC32 of their name
    # unless `channel_ids:` says otherwise.
    class SolidEngine < Base
      CAPABILITIES = {
        at_least_once: true, retries: true, scheduling: true, crash_recovery: true, deduplication: true,
        fencing: true, lease_extension: true, get: true, cancel: true, durability: true,
        # Unique jobs (docs/unique.md): the engine dedupes by job id only and
        # holds no lock a job's own transitions release.
        unique: false,
        # No server command enqueues a recurring tick exactly once.
        recurring: false,
        # No server command pauses a channel yet (docs/flow-control.md):
        # SolidJobs::Channels.pause raises NotSupported for its channels.
        pause: false,
        # Concurrency limits (docs/flow-control.md): slots bound to leases
        # would need a new engine state and its fencing interplay.
        concurrency_limits: false,
        # Priorities 0..9 (docs/flow-control.md): the engine's ready queue
        # is one FIFO per channel; the Publisher refuses a priority other
        # than 5 for its channels.
        priority: false,
        # Rate limits (decision 42): the sliding log lives beside the claim
        # in Redis; the engine has no admission state for it.
        rate_limits: false
      }.freeze
      STATES = %w[scheduled ready reserved completed dead cancelled].freeze
      # A CHANNELS row, in order (docs/protocol.md).
      CHANNEL_FIELDS = %w[channel_id ready scheduled reserved dead oldest_ready_id].freeze
      # Lease per reservation. Running tasks are extended every third of it,
      # so only a dead worker's jobs wait this long to be redelivered.
      DEFAULT_LEASE = 30

      attr_reader :client

      def initialize(name, spec, config)
        super
        url = spec[:url] or
          raise ConfigurationError, "backend #{name.inspect} (solid_engine) needs a url: unix:///path or tcp://host:port"
        unless url.match?(%r{\A(unix|tcp)://}i)
          raise ConfigurationError, "backend #{name.inspect} url #{url.inspect} must be unix:///path or tcp://host:port"
        end

        @channel_ids = spec[:channel_ids]
        @lease = spec.fetch(:lease, DEFAULT_LEASE)
        @client = Ractor.make_shareable(Native::EngineClient.new(url, spec[:password], config.timeouts))
      end

      def capabilities = CAPABILITIES
      def channel_id(channel) = Backends.channel_id(channel, @channel_ids)

      def push(task, argument_lists, channel, max_failures, due_ms)
        id = channel_id(channel)
        return [@client.push(id, task, argument_lists.first, channel, max_failures, due_ms)] if argument_lists.size == 1

        @client.push_many(id, task, argument_lists, channel, max_failures, due_ms)
      end

      def push_envelopes(envelopes, due_ms)
        envelopes.group_by { |e| e["channel"] }
                 .flat_map { |channel, list| @client.push_envelopes(channel_id(channel), list, due_ms) }
      end

      def claim(channel)
        id, fence, _attempts, payload = @client.fetch_one(channel_id(channel.to_s), (@lease * 1000).round)
        return nil unless id

        Claim.new(job_id: id, channel: channel.to_s, envelope: decode(payload), reservation: id, fence: fence, raw: payload)
      end

      def ack(claim)
        @client.settle_ack(claim.job_id, claim.fence)
        true
      end

      def retry_job(claim, delay:)
        @client.settle_retry(claim.job_id, claim.fence, milliseconds(delay))
        true
      end

      # The job becomes dead on the engine, with `reason`.
      def fail_job(claim, reason: "failed")
        @client.settle_fail(claim.job_id, claim.fence, reason.to_s)
        true
      end

      def extend_lease(claim, seconds)
        @client.extend_lease(claim.job_id, claim.fence, milliseconds(seconds))
        true
      end

      # {"id", "channel_id", "state", "attempts", "envelope", "due_ms"}, or nil
      # for an unknown id (any id, as on Redis: one that is not a job id
      # names no job).
      def get_job(id)
        row = @client.get(id.to_s) or return nil
        job_id, channel_id, state, attempts, payload, due_ms = row
        envelope = decode(payload)
        {"id" => job_id, "channel_id" => channel_id, "state" => state, "attempts" => attempts, "envelope" => envelope,
         "due_ms" => due_ms}
      end

      # Every channel of the engine with a live job (or those of `ids`):
      # [{"channel_id", "ready", "scheduled", "reserved", "dead",
      # "oldest_ready_id" (nil when none is ready)}], by channel id.
      def channel_stats(ids = [])
        @client.call(["CHANNELS", *ids.map(&:to_s)]).map do |row|
          head = row[5].to_s
          CHANNEL_FIELDS.zip(row).to_h.merge("oldest_ready_id" => head.empty? ? nil : head)
        end
      end

      # true when the job was waiting (ready or scheduled) and will never run;
      # false when the id is unknown, finished or already cancelled;
      # JobRunning when the job is reserved (running), which changes nothing.
      def cancel(id) = @client.cancel(id.to_s)

      # The engine recovers by itself: an expired lease makes a job ready again.
      def recover = 0

      def source_spec(channels, config:, node_id:, description:)
        c = config
        {kind: "engine", url: @client.url, password: @spec[:password],
         channels: channels.map { |n, w| {name: n, id: channel_id(n), weight: w} }, channel_order: c.channel_order.to_s,
         prefetch: c.prefetch, workers: c.concurrency, lease: @lease.to_f, timeouts: c.timeouts,
         # The node announces itself to the engine (NODE) every heartbeat,
         # so a node with no Redis channel is still listed (Nodes, dashboard).
         node_id: node_id, description: description, heartbeat_interval: c.heartbeat_interval.to_f,
         node_ttl: c.recovery_delay.to_f}
      end
    end
  end
end
