# frozen_string_literal: true

require "json"

module SolidJobs
  # The latest observations of every node (`observations:<node>`, written
  # every observation_interval; docs/observability.md), with freshness: an
  # observation older than two intervals (plus the one-second flush) is not
  # fresh (its node may be stuck or gone; a dead node's observations expire
  # after three intervals).
  #
  #   SolidJobs::Observations.new.nodes
  #   # => [{"node_id", "alive", "node", "process", "ractors", "redis",
  #   #      "at_ms", "age_ms", "fresh", "histograms"}]
  class Observations
    PARTS = %w[node process ractors redis].freeze
    # Observations reach Redis at the node's next journal flush (once a
    # second), so freshness allows for it.
    FLUSH_MS = 1000

    # The freshness rule, for every reader of observations (this API, the
    # dashboard's pages and charts): a node writes at least every
    # observation interval, and its flush may take a second more, so it is
    # still reporting until two intervals and a flush have passed.
    def self.fresh_for_ms(interval_ms = configured_interval_ms) = 2 * interval_ms + FLUSH_MS
    def self.fresh?(age_ms, interval_ms = configured_interval_ms) = !age_ms.nil? && age_ms <= fresh_for_ms(interval_ms)
    # This process's observation_interval; a node reports its own with its
    # observations, which readers prefer.
    def self.configured_interval_ms = (SolidJobs.config.observation_interval * 1000).round

    def initialize(client: SolidJobs.client, namespace: SolidJobs.config.namespace)
      @client = client
      @keys = Native::Keyspace.new(namespace)
    end

    # Registered nodes and nodes with observations, oldest start first. A
    # part never observed is {"state" => "unavailable"}. Each part (each
    # Ractor entry) carries its own "age_ms" and "fresh".
    def nodes(now_ms: Clock.now_ms)
      registered = @client.call(["SMEMBERS", @keys.nodes])
      observed = Scan.names(@client, @keys.observations_pattern)
      (registered | observed).map { |id| node(id, registered.include?(id), now_ms) }
                             .sort_by { |n| [n.dig("node", "started_ms") || 0, n["node_id"]] }
    end

    def node(id, registered, now_ms)
      fields = @client.call(["HGETALL", @keys.observations(id)])
      fields = fields.is_a?(Hash) ? fields : fields.each_slice(2).to_h
      interval = nil
      parts = PARTS.to_h { |p| [p, parse(fields[p])] }
      interval = parts["node"]["observation_interval_ms"] if parts["node"].is_a?(Hash)
      interval ||= Observations.configured_interval_ms
      at = fields["at_ms"]&.to_i
      out = {"node_id" => id, "alive" => registered && @client.call(["EXISTS", @keys.node(id)]) == 1}
      PARTS.each do |p|
        out[p] = if p == "ractors"
                   (parts[p].is_a?(Array) ? parts[p] : []).map { |r| fresh(r, now_ms, interval) }
                 else
                   fresh(parts[p], now_ms, interval)
                 end
      end
      out.merge!(fresh({"at_ms" => at}, now_ms, interval))
      # Cumulative latency and duration buckets since the node started (nil
      # before its first observation): what /metrics exposes.
      out["histograms"] = fields["histograms"] && parse(fields["histograms"])
      out
    end

    private

    def parse(raw)
      raw ? JSON.parse(raw) : {"state" => "unavailable"}
    rescue JSON::ParserError
      {"state" => "unavailable"}
    end

    def fresh(part, now_ms, interval_ms)
      return part unless part.is_a?(Hash)

      at = part["at_ms"]
      age = at.is_a?(Integer) ? [now_ms - at, 0].max : nil
      part.merge("age_ms" => age, "fresh" => Observations.fresh?(age, interval_ms))
    end
  end
end
