# frozen_string_literal: true

# TEMPORARY: stand-ins for the issue-6 read APIs (Catalog, Observations,
# Telemetry::Journal, Console, Nodes) until the data side lands them; each is
# defined only when the real one is missing. Reads the contract's formats.
module SolidJobs
  module ContractStubs
    module_function

    def call(*cmd) = SolidJobs.client.call(cmd.map(&:to_s))
    def key(s) = "#{SolidJobs.config.namespace}:#{s}"
    def now_ms = (Time.now.to_f * 1000).to_i
  end

  unless const_defined?(:Catalog, false)
    class Catalog
      S = ContractStubs
      def channels
        S.call("SMEMBERS", S.key("channels")).sort.map do |name|
          depth = S.call("LLEN", S.key("channel:#{name}")).to_i
          oldest = S.call("LINDEX", S.key("channel:#{name}"), -1)
          latency = oldest && (S.now_ms - JSON.parse(oldest)["queued_ms"].to_i) / 1000.0
          {name: name, depth: depth, latency_s: latency}
        end
      end
      def planned_count = S.call("ZCARD", S.key("planned")).to_i
      def retrying_count = S.call("ZCARD", S.key("retrying")).to_i
      def archived_count = S.call("ZCARD", S.key("archive")).to_i
    end
  end

  unless const_defined?(:Observations, false)
    class Observations
      S = ContractStubs
      def nodes
        S.call("SMEMBERS", S.key("nodes")).sort.map do |id|
          fields = S.call("HGETALL", S.key("observations:#{id}")).each_slice(2).to_h
          parts = fields.transform_values { |v| JSON.parse(v) }
          fresh = ->(part) { part.merge("age_ms" => S.now_ms - part["at_ms"].to_i, "fresh" => S.now_ms - part["at_ms"].to_i <= 2_000) }
          {"node_id" => id, "alive" => true,
           "ractors" => Array(parts["ractors"]).map(&fresh)}
            .merge(%w[node process redis].to_h { |p| [p, parts[p] ? fresh.(parts[p]) : {"state" => "unavailable"}] })
        end
      end
    end
  end

  unless const_defined?(:Telemetry, false)
    module Telemetry
      class Journal
        S = ContractStubs
        def entries(count: 500, after: nil)
          S.call("XREVRANGE", S.key("telemetry"), "+", "-", "COUNT", count).reverse.map do |id, fields|
            f = fields.each_slice(2).to_h
            {"id" => id, "source" => f["source"], "seq" => f["seq"].to_i, "event" => f["event"], "at_ms" => f["at_ms"].to_i,
             "data" => JSON.parse(f["data"])}
          end
        end

        def gaps(entries)
          entries.group_by { |e| e["source"] }.flat_map do |source, mine|
            mine.map { |e| e["seq"] }.sort.each_cons(2).filter_map do |a, b|
              {"source" => source, "from" => a + 1, "to" => b - 1, "size" => b - a - 1} if b > a + 1
            end
          end
        end

        def freshness
          last = entries(count: 1).last
          last ? {"newest_at_ms" => last["at_ms"], "age_ms" => S.now_ms - last["at_ms"]} : {"age_ms" => nil}
        end
      end
    end
  end

  unless const_defined?(:Console, false)
    class Console
      S = ContractStubs
      def find(id)
        index = S.call("HGET", S.key("jobs"), id)
        if index
          state, channel = index.split("|", 2)
          return {"id" => id, "state" => state, "channel" => channel}
        end
        archived = SolidJobs::Archive.find(id)
        archived && archived.merge("state" => "archived")
      end
    end
  end
end
