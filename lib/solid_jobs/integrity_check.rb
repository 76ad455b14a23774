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
  # them), entries that do not decode (sampled per list), channel lists not
  # in the channel registry, channels with work that no configured
  # channel serves, and publications held behind a barrier that expired
  # more than a recovery delay ago (no node is running to release them:
  # docs/observability.md). It issues only reads (SCAN, LLEN, LRANGE,
  # ZCARD, ...).
  module IntegrityCheck
    Report = Struct.new(:counts, :orphaned_claims, :dead_node_claims, :undecodable, :unknown_channels, :unserved_channels,
                        :expired_publications, keyword_init: true) do
      def ok?
        [orphaned_claims, dead_node_claims, undecodable, unknown_channels, expired_publications].all?(&:empty?)
      end
    end

    module_function

    # `sample`: entries decoded per list or set (the newest and the oldest).
    def run(sample: 500)
      client = SolidJobs.client
      ns = SolidJobs.config.namespace
      registry = client.call(["SMEMBERS", "#{ns}:channels"])
      lists = scan(client, "#{ns}:channel:*").map { |k| k.delete_prefix("#{ns}:channel:") }
      nodes = client.call(["SMEMBERS", "#{ns}:nodes"])
      claim_keys = scan(client, "#{ns}:claims:*")
      configured = SolidJobs.config.channels.map(&:first)

      ready = (registry | lists).sort.to_h { |c| [c, client.call(["LLEN", "#{ns}:channel:#{c}"]).to_i] }
      claims = claim_keys.to_h { |k| [k.delete_prefix("#{ns}:claims:"), client.call(["HLEN", k]).to_i] }
      Report.new(
        counts: {
          ready: ready, planned: client.call(["ZCARD", "#{ns}:planned"]).to_i,
          retrying: client.call(["ZCARD", "#{ns}:retrying"]).to_i, claimed: claims.values.sum,
          archived: client.call(["ZCARD", "#{ns}:archive"]).to_i, nodes: nodes.size,
          publishing: client.call(["ZCARD", "#{ns}:publishing"]).to_i
        },
        orphaned_claims: claims.reject { |node, _| nodes.include?(node) }.map { |node, n| {node_id: node, claims: n} },
        dead_node_claims: nodes.reject { |node| client.call(["EXISTS", "#{ns}:node:#{node}"]) == 1 }
                               .map { |node| {node_id: node, claims: claims.fetch(node, 0)} },
        undecodable: undecodable(client, ns, ready.keys, claim_keys, sample),
        unknown_channels: (lists - registry).sort,
        unserved_channels: ready.select { |c, n| n.positive? && !configured.include?(c) }.keys,
        expired_publications: expired_publications(client, ns)
      )
    end

    # Held publications whose barrier expired over a recovery delay ago.
    def expired_publications(client, ns)
      before = Clock.now_ms - (SolidJobs.config.recovery_delay * 1000).round
      client.call(["ZRANGEBYSCORE", "#{ns}:publishing", "-inf", before.to_s, "WITHSCORES", "LIMIT", "0", "100"])
            .each_slice(2).map do |member, expired_ms|
        _due, channel, raw = member.split("|", 3)
        id = begin
          JSON.parse(raw.to_s)["id"]
        rescue JSON::ParserError
          nil
        end
        {id: id, channel: channel, expired_ms: expired_ms.to_i}
      end
    end

    def scan(client, pattern)
      keys = []
      cursor = "0"
      loop do
        cursor, batch = client.call(["SCAN", cursor, "MATCH", pattern, "COUNT", "1000"])
        keys.concat(batch)
        break if cursor == "0"
      end
      keys.uniq
    end

    def undecodable(client, ns, channels, claim_keys, sample)
      found = []
      channels.each do |c|
        entries = sampled_range(client, "LRANGE", "#{ns}:channel:#{c}", sample)
        entries.each { |raw| check(found, "channel:#{c}", raw) }
      end
      %w[planned retrying].each do |set|
        sampled_range(client, "ZRANGE", "#{ns}:#{set}", sample).each do |member|
          _channel, raw = member.split("|", 2)
          check(found, set, raw.to_s)
        end
      end
      claim_keys.each do |k|
        client.call(["HVALS", k]).first(sample).each do |record|
          _channel, _ms, raw = record.split("|", 3)
          check(found, k.delete_prefix("#{ns}:"), raw.to_s)
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
