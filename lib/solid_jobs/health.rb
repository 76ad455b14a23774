# frozen_string_literal: true

require "json"
require "socket"

module SolidJobs
  # Is this deployment working? The check behind `solid-jobs health` and
  # the dashboard's `/health` (docs/operations.md, "Health checks and
  # readiness"):
  #
  # - every backend the configuration routes to answers: Redis (the node
  #   read below is its answer), SolidEngine (PING, then NODES);
  # - the nodes heartbeat: a node is live while its heartbeat key (or its
  #   SolidEngine announcement) exists, and fresh while its last heartbeat
  #   is at most two heartbeat intervals and a second old. Ages are read on
  #   the backend's clock (Redis: the key's remaining TTL against the TTL
  #   the node sets; SolidEngine: the age NODES reports), never the prober's.
  #
  # Scope: every node (at least one must be fresh), `local: true` (the
  # nodes started on this host, by hostname: each live one fresh, at least
  # one), or `node: ID` (that node, live and fresh). Nodes whose channels
  # are all on SolidEngine announce themselves to it (NODE, each
  # heartbeat), so an engine-only deployment's nodes are checked there; an
  # engine without NODES (an older server) leaves them unchecked, and the
  # result says so.
  #
  # Bounded: each backend is asked on its own thread with clients of its
  # own whose timeouts are half the budget (connect, then read), and the
  # check waits for them until the budget is spent; a hung Redis makes it
  # unhealthy, never late. The result names backends and nodes, never a
  # URL or a password.
  class Health
    DEFAULT_TIMEOUT = 3.0
    # Nodes reported per Redis backend; a larger registry is counted.
    NODE_LIMIT = 1000
    # Slack on top of two heartbeat intervals before a node is stale: the
    # heartbeat script's own round trip, and a beat retried after an error.
    FRESH_SLACK_MS = 1000
    # Why nodes are not checked on a configuration without Redis.
    ENGINE_ONLY_NOTE = "node heartbeats are not checked: no channel is routed to Redis, and this SolidEngine keeps no " \
                       "node registry (NODES; its answer to PING is the check)"

    # healthy: Boolean; failure: nil, :backend or :nodes; reason: the one
    # line why (or what was found healthy); to_h: the JSON body.
    Result = Struct.new(:healthy, :failure, :reason, :backends, :nodes, :scope, keyword_init: true) do
      def healthy? = healthy

      def to_h
        {"status" => healthy ? "ok" : "unhealthy", "reason" => reason, "scope" => scope, "backends" => backends,
         "nodes" => nodes}
      end
    end

    def self.fresh_for_ms(heartbeat_interval_ms) = (2 * heartbeat_interval_ms) + FRESH_SLACK_MS

    # clients: {name => [kind, native client]} built once (the dashboard
    # keeps one Health per app, so its connections are reused); nil builds
    # them from the configuration.
    def initialize(config: SolidJobs.config, timeout: DEFAULT_TIMEOUT, node: nil, local: false, hostname: nil)
      raise ArgumentError, "timeout must be a positive number of seconds" unless timeout.is_a?(Numeric) && timeout.positive?

      @config = config
      @timeout = timeout.to_f
      @node = node
      @local = local
      @hostname = hostname || Socket.gethostname
      @clients = build_clients
    end

    # Whether some check is still waiting on a backend that did not answer
    # in time (the CLI then leaves without waiting for it).
    def stragglers? = @stragglers&.any?(&:alive?) || false

    def check
      deadline = monotonic + @timeout
      @stragglers = []
      answers = @clients.to_h do |name, (kind, client)|
        thread = Thread.new { ask(kind, client) }
        thread.report_on_exception = false
        [name, [kind, thread]]
      end
      backends = answers.map do |name, (kind, thread)|
        answered = thread.join([deadline - monotonic, 0].max)
        @stragglers << thread unless answered
        backend_entry(name, kind, answered ? thread.value : {error: "no answer within #{format_s(@timeout)}"})
      end
      judge(backends)
    end

    private

    def redis? = @clients.any? { |_, (kind, _)| kind == :redis }

    def scope_name
      return "node #{@node}" if @node

      @local ? "the nodes on this host (#{@hostname})" : "the nodes"
    end

    # Clients of their own, not the application's: the probe's timeouts.
    def build_clients
      part = @timeout / 2
      timeouts = {connect: part, read: part, write: part}
      specs = @config.backend_specs
      used = ([@config.backend] + @config.channel_backends.values).uniq
      used.to_h do |name|
        spec = specs.fetch(name)
        if Backends::ADAPTERS[spec[:adapter].to_sym] == "SolidEngine"
          [name, [:engine, Native::EngineClient.new(spec[:url], spec[:password], timeouts)]]
        else
          [name, [:redis, Native::Client.new(spec[:url] || @config.redis_url, @config.namespace, timeouts)]]
        end
      end
    end

    # Runs on its own thread: {latency_ms:, nodes:} or {error:}.
    def ask(kind, client)
      started = monotonic
      answer = {}
      if kind == :redis
        _now_ms, registered, nodes = client.node_health(NODE_LIMIT)
        default_ttl_ms = (@config.recovery_delay * 1000).round
        list = nodes.map do |id, ttl_ms, raw|
          description = parse(raw)
          [id, Nodes.heartbeat_age_ms(description, ttl_ms, default_ttl_ms: default_ttl_ms), description]
        end
        answer[:nodes] = {registered: registered, list: list}
      else
        client.call(["PING"])
        answer[:nodes] = engine_nodes(client)
      end
      answer.merge(latency_ms: ((monotonic - started) * 1000).round(1))
    rescue StandardError => e
      # Whatever failed (a SolidJobs::Error from the backend, or a reply
      # the check did not expect) is that backend's answer, not a crash.
      {error: "#{e.class.name.split("::").last}: #{e.message}"}
    end

    # The nodes announced to a SolidEngine (NODES: [id, age_ms, ttl_ms,
    # description], ages on the engine's clock), or nil from a server that
    # has no registry.
    def engine_nodes(client)
      rows = client.call(["NODES"])
      {registered: rows.size, list: rows.first(NODE_LIMIT).map { |id, age_ms, _ttl_ms, raw| [id, age_ms, parse(raw)] }}
    rescue EngineError => e
      raise unless e.message.match?(/unknown command/i)

      nil
    end

    def backend_entry(name, kind, answer)
      entry = {"name" => name.to_s, "kind" => kind == :redis ? "redis" : "solid_engine", "reachable" => !answer[:error]}
      entry["latency_ms"] = answer[:latency_ms] if answer[:latency_ms]
      entry["error"] = without_urls(answer[:error]) if answer[:error]
      entry[:nodes] = answer[:nodes] if answer[:nodes]
      entry
    end

    def judge(backends)
      down = backends.reject { |b| b["reachable"] }
      nodes = node_report(backends)
      backends.each { |b| b.delete(:nodes) }
      result = Result.new(backends: backends, nodes: nodes, scope: scope_label)
      if down.any?
        reasons = down.map { |b| "#{b["name"]} (#{b["kind"]}) unreachable: #{b["error"]}" }
        return fill(result, false, :backend, reasons.join("; "))
      end
      unless nodes["checked"]
        return fill(result, false, :nodes, "#{scope_name} cannot be checked: #{ENGINE_ONLY_NOTE}") if @node || @local

        return fill(result, true, nil, "#{backend_summary(backends)}; #{ENGINE_ONLY_NOTE}")
      end

      judge_nodes(result, nodes, backends)
    end

    # A backend's error without the URL it quotes: /health may be public
    # (--public-health), and a URL names hosts, ports and users even with
    # its password masked. The backend is named beside it; the server log
    # has the detail.
    URL = %r{\b[a-z][a-z0-9+.-]*://[^\s)\]]+}i

    def without_urls(message) = Native.redact(message).gsub(URL, "<url>")

    def fill(result, healthy, failure, reason)
      result.healthy = healthy
      result.failure = failure
      result.reason = reason
      result
    end

    def scope_label
      return {"node" => @node} if @node

      @local ? {"hostname" => @hostname} : {"all" => true}
    end

    def judge_nodes(result, nodes, backends)
      list = nodes["list"]
      live = list.select { |n| n["live"] }
      fresh = live.select { |n| n["fresh"] }
      stale = live.reject { |n| n["fresh"] }
      if @node
        found = list.find { |n| n["id"] == @node }
        return fill(result, false, :nodes, "node #{@node} is not registered (never started, or stopped)") unless found
        return fill(result, false, :nodes, "node #{@node} is dead: its heartbeat expired") unless found["live"]
        return fill(result, false, :nodes, "node #{@node} is stale: #{stale_text(found)}") unless found["fresh"]

        return fill(result, true, nil, "#{backend_summary(backends)}; node #{@node} heartbeat #{age_text(found)} ago")
      end
      if @local && stale.any?
        return fill(result, false, :nodes, "#{stale.size} stale node(s) on #{@hostname}: " +
                                           stale.first(3).map { |n| "#{n["id"]} #{stale_text(n)}" }.join(", "))
      end
      if fresh.empty?
        where = @local ? " on #{@hostname}" : ""
        why = stale.empty? ? "no live node#{where}" : "no fresh node#{where}: #{stale.size} stale (#{stale_text(stale.first)})"
        return fill(result, false, :nodes, why)
      end
      fill(result, true, nil, "#{backend_summary(backends)}; #{fresh.size} fresh node(s)#{" on #{@hostname}" if @local}" +
                              (stale.any? ? ", #{stale.size} stale" : ""))
    end

    # {"checked", "registered", "live", "fresh", "list" => [...]} over the
    # Redis backends (a node serving several Redis backends appears once,
    # as the freshest).
    def node_report(backends)
      reads = backends.filter_map { |b| b[:nodes] }
      return {"checked" => false, "note" => ENGINE_ONLY_NOTE} if reads.empty? && !redis?
      return {"checked" => true, "list" => []} if reads.empty?

      list = {}
      reads.each do |read|
        read[:list].each do |id, age_ms, description|
          node = node_entry(id, age_ms, description)
          hostname = node.delete(:hostname)
          next if @local && hostname != @hostname

          list[id] = node if list[id].nil? || age_of(node) < age_of(list[id])
        end
      end
      nodes = list.values.sort_by { |n| n["id"] }
      {"checked" => true, "registered" => reads.sum { |r| r[:registered] }, "live" => nodes.count { |n| n["live"] },
       "fresh" => nodes.count { |n| n["fresh"] }, "list" => nodes}
    end

    # A node's freshness from the age of its last heartbeat (nil: its
    # registration is gone). A node described without its interval (an
    # older version) is read with this configuration's.
    def node_entry(id, age, description)
      interval_ms = description["heartbeat_interval_ms"] || (@config.heartbeat_interval * 1000).round
      live = !age.nil?
      fresh_for = Health.fresh_for_ms(interval_ms)
      {"id" => id, "live" => live, "fresh" => live && age <= fresh_for, "heartbeat_age_ms" => age,
       "stale_after_ms" => fresh_for, hostname: description["hostname"]}
    end

    def age_of(node) = node["heartbeat_age_ms"] || Float::INFINITY

    def parse(raw)
      value = raw && JSON.parse(raw)
      value.is_a?(Hash) ? value : {}
    rescue JSON::ParserError
      {}
    end

    def backend_summary(backends)
      backends.map { |b| "#{b["name"]} (#{b["kind"]}) answered in #{b["latency_ms"]} ms" }.join(", ")
    end

    def stale_text(node) = "last heartbeat #{age_text(node)} ago, stale after #{format_s(node["stale_after_ms"] / 1000.0)}"
    def age_text(node) = format_s(node["heartbeat_age_ms"] / 1000.0)
    def format_s(seconds) = "#{seconds.round(1)}s"
    def monotonic = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  end
end
