# frozen_string_literal: true

require "json"

module SolidJobs
  # What the Redis keyspace and the SolidEngine backends hold, for operators
  # and the dashboard. Reads only; every figure is counted when asked,
  # nothing is kept.
  #
  #   catalog = SolidJobs::Catalog.new
  #   catalog.channels   # [{"name", "depth", "latency_s", "paused"}]
  #   catalog.tasks      # ["RecalculateAccount", ...]
  #   catalog.concurrency_keys  # [{"key", "held", "blocked", "limit", ...}]
  class Catalog
    # Channels of a SolidEngine that no routing here names, listed at most.
    UNNAMED_ENGINE_CHANNELS = 100

    # routing: which backend serves each channel (nil: Redis serves all);
    # by default the configured one, built when a channel list needs it,
    # so the Redis-only reads never depend on it.
    def initialize(client: SolidJobs.client, config: SolidJobs.config, routing: :configured)
      @client = client
      @config = config
      @routing = routing
      @keys = Native::Keyspace.new(config.namespace)
    end

    # Every known channel (written to, configured here, or holding jobs on
    # a SolidEngine backend), Redis' first by name, then each engine's: ready
    # jobs (`depth`) and how long the oldest of them has waited
    # (`latency_s`, nil when empty or undecodable), `paused`: nil, or
    # {"paused_ms", "by"} while the channel is paused (SolidJobs::Channels),
    # and `backend`, the name of the backend serving it.
    #
    # A SolidEngine channel also has "scheduled", "reserved", "dead" and
    # "channel_id"; one whose name no routing here gives is named
    # "<backend>#<channel_id>" (the UNNAMED_ENGINE_CHANNELS fullest of them). An engine that does not answer gives its known
    # channels `depth` nil and `unavailable` (the error), so an engine that
    # is down hides neither Redis' channels nor the other engines'.
    def channels(now_ms: Clock.now_ms) = redis_channels(now_ms: now_ms) + engine_channels(now_ms: now_ms)

    # The channels Redis serves (#channels' first part): reads Redis only.
    def redis_channels(now_ms: Clock.now_ms)
      names = known_channels.reject { |name| engine_for(name) }.sort
      redis_rows(names, now_ms)
    end

    # The channels of every SolidEngine backend (#channels' second part):
    # reads each engine, within its own timeouts, and Redis not at all.
    def engine_channels(now_ms: Clock.now_ms)
      names = @config.channels.map(&:first) | @config.channel_backends.keys.map(&:to_s)
      on_engines = names.group_by { |name| engine_for(name) }
      engine_backends.flat_map { |b| engine_rows(b, on_engines[b].to_a, now_ms) }
    end

    private def known_channels
      @client.call(["SMEMBERS", @keys.channels]) | @config.channels.map(&:first) | @config.channel_backends.keys.map(&:to_s)
    end

    private def redis_rows(names, now_ms)
      paused = @client.paused_channels.to_h { |name, ms, by| [name, {"paused_ms" => ms, "by" => by}] }
      backend = routing&.redis&.name&.to_s
      names.map do |name|
        levels = level_depths(name)
        lists = [@keys.channel(name), *levels.keys.map { |p| @keys.channel("#{name}:#{p}") }]
        depths = lists.map { |list| @client.call(["LLEN", list]).to_i }
        oldest = lists.zip(depths).filter_map { |list, n| @client.call(["LINDEX", list, "-1"]) if n.positive? }
        latencies = oldest.filter_map { |raw| latency(raw, now_ms) }
        levels = levels.keys.zip(depths.drop(1)).to_h
        {"name" => name, "depth" => depths.sum, "latency_s" => latencies.max, "paused" => paused[name],
         "levels" => levels.empty? ? nil : levels, "backend" => backend}
      end
    end

    # One engine's channels (CHANNELS): those routed to it by name, and any
    # other channel it holds jobs of. The latency is read from the envelope
    # of the job at the head of the ready queue (one GET per non-empty
    # channel), as Redis' is from the oldest job of a list.
    private def engine_rows(backend, names, now_ms)
      by_id = names.to_h { |name| [backend.channel_id(name), name] }
      stats = backend.channel_stats.to_h { |row| [row["channel_id"], row] }
      # Channels no routing here names: the fullest UNNAMED_ENGINE_CHANNELS,
      # so a client that spread jobs over a million channel ids costs a
      # page bounded reads (one GET per channel with ready jobs).
      unnamed = (stats.keys - by_id.keys).max_by(UNNAMED_ENGINE_CHANNELS) { |id| stats[id]["ready"] }
      (by_id.keys | unnamed).map do |id|
        row = stats[id] || {"ready" => 0, "scheduled" => 0, "reserved" => 0, "dead" => 0}
        head = row["oldest_ready_id"] && backend.get_job(row["oldest_ready_id"])
        queued = head && head["envelope"].is_a?(Hash) ? head["envelope"]["queued_ms"] : nil
        {"name" => by_id.fetch(id) { "#{backend.name}##{id}" }, "depth" => row["ready"],
         "latency_s" => queued.is_a?(Integer) ? [(now_ms - queued) / 1000.0, 0.0].max : nil, "paused" => nil,
         "levels" => nil, "backend" => backend.name.to_s, "channel_id" => id,
         **row.slice("scheduled", "reserved", "dead")}
      end.sort_by { |c| c["name"] }
    # An engine older than CHANNELS answers UNKNOWN: unavailable too.
    rescue ConnectionError, EngineError => e
      names.sort.map do |name|
        {"name" => name, "depth" => nil, "latency_s" => nil, "paused" => nil, "levels" => nil,
         "backend" => backend.name.to_s, "channel_id" => backend.channel_id(name), "unavailable" => e.message}
      end
    end

    # The priority levels (docs/flow-control.md, "Priorities") a channel
    # has used, from bytes 1..10 of its flow string, as {level => nil};
    # the base list (level 5) is the channel's own and not among them.
    def level_depths(name)
      flow = @client.call(["GET", @keys.flow(name)]) or return {}

      (0..9).select { |p| flow.getbyte(1 + p) == 49 }.to_h { |p| [p, nil] }
    end

    # Concurrency keys in use (docs/flow-control.md), at most `limit`: a
    # key's slots held, its blocked jobs, and, read from its oldest blocked
    # job's envelope, the limit in force for it, its task and its label
    # (the key as the task's `key:` returned it). nil when no job of the
    # key is blocked: slots hold claim tokens only.
    # [{"key", "held", "blocked", "limit", "task", "label"}]
    def concurrency_keys(limit: 200)
      hexes = (Scan.names(@client, @keys.slots_pattern) | Scan.names(@client, @keys.blocked_pattern)).sort.first(limit)
      hexes.map do |hex|
        blocked = @client.call(["LLEN", @keys.blocked(hex)]).to_i
        oldest = blocked.positive? ? @client.call(["LINDEX", @keys.blocked(hex), "-1"]) : nil
        envelope = oldest && parse(oldest.split("|", 2).last)
        meta = (envelope && envelope["meta"]).is_a?(Hash) ? envelope["meta"] : {}
        {"key" => hex, "held" => @client.call(["SCARD", @keys.slots(hex)]).to_i, "blocked" => blocked,
         "limit" => meta.dig("flow", "cl"), "task" => envelope && envelope["task"], "label" => meta["flow_label"]}
      end
    end

    # Rate keys in use (decision 42), at most `limit`: a key's admissions
    # still logged (at most its limit; the log expires with the window),
    # its throttled jobs, when it next wakes (Redis-clock ms, nil when
    # nothing waits), and, from its oldest throttled job's envelope, the
    # limit, the window in ms, its task and its label.
    # [{"key", "logged", "throttled", "wake_ms", "limit", "window_ms", "task", "label"}]
    def rate_keys(limit: 200)
      hexes = (Scan.names(@client, @keys.rate_pattern) | Scan.names(@client, @keys.throttled_pattern)).sort.first(limit)
      hexes.map do |hex|
        throttled = @client.call(["LLEN", @keys.throttled(hex)]).to_i
        oldest = throttled.positive? ? @client.call(["LINDEX", @keys.throttled(hex), "-1"]) : nil
        envelope = oldest && parse(oldest.split("|", 2).last)
        meta = (envelope && envelope["meta"]).is_a?(Hash) ? envelope["meta"] : {}
        wake = @client.call(["ZSCORE", @keys.flow_wake, hex])
        {"key" => hex, "logged" => @client.call(["LLEN", @keys.rate(hex)]).to_i, "throttled" => throttled,
         "wake_ms" => wake&.to_f&.to_i, "limit" => meta.dig("flow", "rl"), "window_ms" => meta.dig("flow", "rw"),
         "task" => envelope && envelope["task"], "label" => meta["flow_label"]}
      end
    end

    def planned_count = zcard(@keys.planned)
    def retrying_count = zcard(@keys.retrying)
    def archived_count = zcard(@keys.archive)
    # Publications behind the publication barrier right now.
    def publishing_count = zcard(@keys.publishing)

    # Task names seen by nodes (claimed) and publishers (enqueued), and in
    # the archive.
    def tasks
      seen = @client.call(["SMEMBERS", @keys.tasks])
      archived = Archive.new(client: @client, namespace: @config.namespace).list(limit: 200).filter_map { |r| r["task"] }
      (seen | archived).sort
    end

    private

    def routing
      @routing = SolidJobs.routing if @routing == :configured
      @routing
    end

    def engine_backends = routing ? routing.backends.values.grep(Backends::SolidEngine) : []

    # The SolidEngine backend serving `name`, or nil (Redis).
    def engine_for(name)
      backend = routing&.backend_for(name)
      backend.is_a?(Backends::SolidEngine) ? backend : nil
    end

    def latency(raw, now_ms)
      queued = JSON.parse(raw)["queued_ms"]
      queued.is_a?(Integer) ? [(now_ms - queued) / 1000.0, 0.0].max : nil
    rescue JSON::ParserError
      nil
    end

    def parse(raw)
      value = JSON.parse(raw)
      value.is_a?(Hash) ? value : nil
    rescue JSON::ParserError
      nil
    end

    def zcard(key) = @client.call(["ZCARD", key]).to_i
  end
end
