# frozen_string_literal: true

module SolidJobs
  # A read-only health report of the keyspace:
  #
  #   report = SolidJobs::IntegrityCheck.run
  #   report.ok?       # => true when nothing needs attention
  #   report.to_h      # counts per state and every finding
  #
  # Findings: claims held by nodes that are not registered (orphaned), claims
  # of registered nodes whose heartbeat expired (dead: recovery will move
  # them), claims recorded under a live node that the node does not hold
  # (unheld: a claim whose reply was lost arrived late, or Redis brought a
  # settled claim back; the node's next heartbeat hands them back), entries
  # that do not decode (sampled per list), channel lists not in the channel
  # registry, channels with work that no configured
  # channel serves, and publications held behind a barrier that expired
  # more than a recovery delay ago (no node is running to release them:
  # docs/observability.md), and unique locks whose job is neither live nor
  # archived (stale_locks: the scripts that end a job release its lock, so
  # only lost writes leave one; the next enqueue of its key takes it over:
  # docs/unique.md), and concurrency slots whose claim is gone
  # (orphaned_slots: a slot is added and removed with its claim record, in
  # the same script, so only lost writes or a hand edit leave one; it
  # lowers its key's limit until removed: docs/flow-control.md), and
  # throttled lists whose key has no `flow:wake` member (unwoken_throttled:
  # the claim that throttles a job records the wake in the same script, and
  # the promotion that removes it moves the jobs or records the next one,
  # so only lost writes or a hand edit leave one; its jobs wait until a
  # claim throttles another job of the key: decision 42). It issues
  # only reads (SCAN, LLEN, LRANGE, ZCARD, ...).
  module IntegrityCheck
    Report = Struct.new(:counts, :orphaned_claims, :dead_node_claims, :unheld_claims, :undecodable, :unknown_channels,
                        :unserved_channels, :expired_publications, :stale_locks, :orphaned_slots,
                        :unwoken_throttled, keyword_init: true) do
      def ok?
        [orphaned_claims, dead_node_claims, unheld_claims, undecodable, unknown_channels, expired_publications,
         stale_locks, orphaned_slots, unwoken_throttled].all?(&:empty?)
      end
    end

    module_function

    # `sample`: entries decoded per list or set (the newest and the oldest).
    def run(sample: 500)
      client = SolidJobs.client
      keys = Native::Keyspace.new(SolidJobs.config.namespace)
      registry = client.call(["SMEMBERS", keys.channels])
      lists = Scan.names(client, keys.channel_pattern)
      nodes = client.call(["SMEMBERS", keys.nodes])
      claimants = Scan.names(client, keys.claims_pattern)
      configured = SolidJobs.config.channels.map(&:first)

      # Slots first, claims after: see orphaned_slots.
      slots = Scan.names(client, keys.slots_pattern).to_h { |hex| [hex, client.call(["SMEMBERS", keys.slots(hex)])] }
      throttled = Scan.names(client, keys.throttled_pattern)
      ready = (registry | lists).sort.to_h { |c| [c, client.call(["LLEN", keys.channel(c)]).to_i] }
      claims = claimants.to_h { |node| [node, client.call(["HLEN", keys.claims(node)]).to_i] }
      live = nodes.select { |node| client.call(["EXISTS", keys.node(node)]) == 1 }
      Report.new(
        counts: {
          ready: ready, planned: client.call(["ZCARD", keys.planned]).to_i,
          retrying: client.call(["ZCARD", keys.retrying]).to_i, claimed: claims.values.sum,
          archived: client.call(["ZCARD", keys.archive]).to_i, nodes: nodes.size,
          publishing: client.call(["ZCARD", keys.publishing]).to_i,
          blocked: Scan.names(client, keys.blocked_pattern).sum { |hex| client.call(["LLEN", keys.blocked(hex)]).to_i },
          slots: slots.values.sum(&:size),
          throttled: throttled.sum { |hex| client.call(["LLEN", keys.throttled(hex)]).to_i }
        },
        orphaned_claims: claims.reject { |node, _| nodes.include?(node) }.map { |node, n| {node_id: node, claims: n} },
        dead_node_claims: (nodes - live).map { |node| {node_id: node, claims: claims.fetch(node, 0)} },
        unheld_claims: live.flat_map { |node| unheld_claims(client, keys, node) },
        undecodable: undecodable(client, keys, ready.keys, claimants, sample),
        unknown_channels: lists.reject { |l| registry.include?(channel_of(l)) }.sort,
        unserved_channels: ready.select { |c, n| n.positive? && !configured.include?(channel_of(c)) }.keys,
        expired_publications: expired_publications(client, keys),
        stale_locks: stale_locks(client, keys, sample),
        orphaned_slots: orphaned_slots(client, keys, slots, claimants),
        unwoken_throttled: unwoken_throttled(client, keys, throttled)
      )
    end

    # The channel of a list's route: `mailers:3` (priority 3's list,
    # docs/flow-control.md "Priorities") belongs to `mailers`.
    def channel_of(route) = route.sub(/:\d\z/, "")

    # Throttled keys with jobs and no wake: [{key:, throttled:}]. The wake
    # is read before and after the list (a claim that throttles in between
    # records one; a promotion that removes one either empties the list or
    # records the next), so a key reported had none on both reads.
    def unwoken_throttled(client, keys, hexes)
      hexes.filter_map do |hex|
        next if client.call(["ZSCORE", keys.flow_wake, hex])

        n = client.call(["LLEN", keys.throttled(hex)]).to_i
        {key: hex, throttled: n} if n.positive? && client.call(["ZSCORE", keys.flow_wake, hex]).nil?
      end
    end

    # Slot tokens (read before the claims) in no claim hash, and still in
    # their set afterwards: [{key:, token:}]. A slot exists exactly while
    # its claim does (both change in one script), so a token seen in its set
    # before the claims were read and again after had its claim throughout:
    # missing from the claims, it is an orphan, not a race.
    def orphaned_slots(client, keys, slots, claimants)
      return [] if slots.empty?

      claimed = claimants.each_with_object({}) do |node, all|
        client.call(["HKEYS", keys.claims(node)]).each { |t| all[t] = true }
      end
      slots.flat_map do |hex, tokens|
        tokens.reject { |t| claimed[t] }.select { |t| client.call(["SISMEMBER", keys.slots(hex), t]) == 1 }
              .map { |t| {key: hex, token: t.to_i} }
      end
    end

    # Claims of a live node that it did not hold at its last heartbeat. The
    # heartbeat writes what the node held (`holding:<node>`: the stamp floor
    # and every token) in the same script that hands back whatever else is
    # recorded under the node, so a claim stamped below that floor and not
    # in that list appeared after the heartbeat with an old stamp (a late
    # claim, or a Redis rollback) and nobody will run it. The record is read
    # before the claims: a claim settled in between is simply absent, never
    # reported. A node that writes no record (an older version) is skipped.
    def unheld_claims(client, keys, node)
      record = client.call(["GET", keys.holding(node)])
      return [] unless record

      floor, _checked_ms, tokens = record.split("|", 3)
      held = tokens.to_s.split(",").to_h { |t| [t, true] }
      client.call(["HGETALL", keys.claims(node)]).each_slice(2).filter_map do |token, claim|
        channel, stamp, raw = claim.split("|", 3)
        next if held[token] || stamp.to_i >= floor.to_i

        {node_id: node, token: token.to_i, channel: channel, claimed_ms: stamp.to_i, job_id: job_id(raw)}
      end
    end

    def job_id(raw)
      JSON.parse(raw.to_s)["id"]
    rescue JSON::ParserError, TypeError
      nil
    end

    # Held publications whose barrier expired over a recovery delay ago.
    # Barrier expiries are on Redis' clock (hold.lua), so "now" is too.
    # Up to `sample` unique locks whose holder is in neither the job index
    # nor the archive: [{lock:, job_id:}]. A holder that completes between
    # the reads deletes its lock with it, so each candidate is read again.
    def stale_locks(client, keys, sample)
      cursor = "0"
      found = []
      checked = 0
      loop do
        cursor, batch = client.call(["SCAN", cursor, "MATCH", keys.unique_pattern, "COUNT", "500"])
        batch.each do |lock|
          break if checked >= sample

          checked += 1
          holder = client.call(["GET", lock]) or next
          next if client.call(["HEXISTS", keys.jobs, holder]) == 1 || client.call(["ZSCORE", keys.archive, holder])

          found << {lock: lock, job_id: holder} if client.call(["GET", lock]) == holder
        end
        break if cursor == "0" || checked >= sample
      end
      found
    end

    def expired_publications(client, keys)
      seconds, micros = client.call(["TIME"]).map(&:to_i)
      before = (seconds * 1000) + (micros / 1000) - (SolidJobs.config.recovery_delay * 1000).round
      client.call(["ZRANGEBYSCORE", keys.publishing, "-inf", before.to_s, "WITHSCORES", "LIMIT", "0", "100"])
            .each_slice(2).map do |member, expired_ms|
        _due, channel, raw = member.split("|", 3)
        {id: job_id(raw), channel: channel, expired_ms: expired_ms.to_i}
      end
    end

    # Findings name where an entry was met by its key without the namespace
    # ("channel:default", "planned", "claims:<node>").
    def undecodable(client, keys, channels, claimants, sample)
      found = []
      channels.each do |c|
        entries = sampled_range(client, "LRANGE", keys.channel(c), sample)
        entries.each { |raw| check(found, "channel:#{c}", raw) }
      end
      {"planned" => keys.planned, "retrying" => keys.retrying}.each do |set, key|
        sampled_range(client, "ZRANGE", key, sample).each do |member|
          _channel, raw = member.split("|", 2)
          check(found, set, raw.to_s)
        end
      end
      claimants.each do |node|
        client.call(["HVALS", keys.claims(node)]).first(sample).each do |record|
          _channel, _ms, raw = record.split("|", 3)
          check(found, "claims:#{node}", raw.to_s)
        end
      end
      found
    end

    def sampled_range(client, command, key, sample)
      half = [sample / 2, 1].max
      head = client.call([command, key, "0", (half - 1).to_s])
      return head if head.size < half

      head + client.call([command, key, (-half).to_s, "-1"])
    end

    def check(found, where, raw)
      Native.decode_envelope(raw)
    rescue EnvelopeError => e
      found << {where: where, reason: e.message, raw: raw[0, 200]}
    end
  end
end
