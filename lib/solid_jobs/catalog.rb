# frozen_string_literal: true

require "json"

module SolidJobs
  # What the Redis keyspace holds, for operators and the dashboard. Reads
  # only; every figure is counted from Redis when asked, nothing is kept.
  #
  #   catalog = SolidJobs::Catalog.new
  #   catalog.channels   # [{"name", "depth", "latency_s", "paused"}]
  #   catalog.tasks      # ["RecalculateAccount", ...]
  #   catalog.concurrency_keys  # [{"key", "held", "blocked", "limit", ...}]
  class Catalog
    def initialize(client: SolidJobs.client, config: SolidJobs.config)
      @client = client
      @config = config
      @keys = Native::Keyspace.new(config.namespace)
    end

    # Every known channel (written to, or configured here), by name: ready
    # jobs (`depth`) and how long the oldest of them has waited
    # (`latency_s`, nil when empty or undecodable), and `paused`: nil, or
    # {"paused_ms", "by"} while the channel is paused (SolidJobs::Channels).
    def channels(now_ms: Clock.now_ms)
      names = (@client.call(["SMEMBERS", @keys.channels]) | @config.channels.map(&:first)).sort
      paused = @client.paused_channels.to_h { |name, ms, by| [name, {"paused_ms" => ms, "by" => by}] }
      names.map do |name|
        levels = level_depths(name)
        lists = [@keys.channel(name), *levels.keys.map { |p| @keys.channel("#{name}:#{p}") }]
        depths = lists.map { |list| @client.call(["LLEN", list]).to_i }
        oldest = lists.zip(depths).filter_map { |list, n| @client.call(["LINDEX", list, "-1"]) if n.positive? }
        latencies = oldest.filter_map { |raw| latency(raw, now_ms) }
        levels = levels.keys.zip(depths.drop(1)).to_h
        {"name" => name, "depth" => depths.sum, "latency_s" => latencies.max, "paused" => paused[name],
         "levels" => levels.empty? ? nil : levels}
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
