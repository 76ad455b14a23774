# frozen_string_literal: true

require "json"

module SolidJobs
  class Web
    # `/metrics`: the namespace in the Prometheus text exposition format
    # (version 0.0.4). Any dashboard reads the whole namespace (every
    # channel, every node's observations, the shared counters), so one
    # dashboard is scraped for all nodes (docs/operations.md, "Metrics").
    #
    # Sources, all read when scraped, nothing kept between scrapes:
    # - channels, planned, retrying, archived: Catalog (counted from Redis);
    # - processed, failed, retried, dead: the counters the scripts increment
    #   in the same call as the state change (`metric:*`), so they are
    #   exact, cumulative and cost the job path nothing;
    # - per node: Observations (workers, RSS), the heartbeat key's TTL, and
    #   the cumulative latency and duration buckets each node writes with
    #   its observations (the journal's `metrics.interval` are per-second
    #   windows of percentiles, which no sum turns into a counter).
    #
    # Bounded: the first read that fails (Redis down, or hung past the
    # configured read timeout) ends the reads, so a hung Redis costs a
    # scrape one timeout, not one per read; and a Redis slow enough that
    # the scrape has spent a read timeout already gets no further reads
    # either (at most about two timeouts in all). It still answers 200 with
    # `solid_jobs_up 0` and whatever was read before, so alerts see "down",
    # not a failed scrape.
    # No job arguments, error messages or URLs are read or written.
    class Metrics
      CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
      PATH = "/metrics"

      # Exposed counter => its key under `<ns>:metric:`.
      COUNTERS = {
        "solid_jobs_jobs_processed_total" => ["processed", "Jobs completed and acknowledged (Redis backend)."],
        "solid_jobs_jobs_failed_total" => ["failed", "Task failures recorded, unknown-task attempts included (Redis backend)."],
        "solid_jobs_jobs_retried_total" => ["retried", "Retries scheduled (Redis backend)."],
        "solid_jobs_jobs_dead_total" => ["discarded", "Jobs given up: archived, dropped or quarantined (Redis backend)."],
        "solid_jobs_jobs_blocked_total" => ["blocked",
                                            "Jobs a claim set aside over their concurrency limit (Redis backend)."],
        "solid_jobs_jobs_throttled_total" => ["throttled", "Jobs a claim set aside over their rate limit (Redis backend)."],
        "solid_jobs_jobs_handed_back_total" => ["handed_back",
                                                "Rate limited jobs handed back unstarted past their start slack (Redis backend)."]
      }.freeze

      HISTOGRAMS = {
        "latency" => ["solid_jobs_job_latency_seconds", "Time from ready (enqueued or due) to start, per node since it started."],
        "duration" => ["solid_jobs_job_duration_seconds",
                       "Time from taken by a worker to returned or raised, per node since it started."]
      }.freeze

      # Worker states as the observations report them => the exposed state.
      WORKER_STATES = {"running" => "busy", "waiting" => "idle"}.freeze

      def initialize(client: SolidJobs.client, config: SolidJobs.config, now_ms: Clock.now_ms)
        @client = client
        @config = config
        @keys = Native::Keyspace.new(config.namespace)
        @now_ms = now_ms
        @error = nil
        @families = []
        @budget_s = config.read_timeout.to_f
      end

      # The exposition text.
      def render
        @started = started = monotonic
        channels
        job_counts
        counters
        nodes
        gauge("solid_jobs_up", "1 when every read of this scrape succeeded, 0 when Redis failed or hung (see the log).",
              [[{}, @error ? 0 : 1]])
        gauge("solid_jobs_scrape_duration_seconds", "Time this scrape spent reading Redis.",
              [[{}, monotonic - started]])
        @families.join
      end

      # Why the scrape is incomplete (redacted), or nil.
      attr_reader :error

      private

      def channels
        catalog = Catalog.new(client: @client, config: @config)
        list = read { catalog.redis_channels(now_ms: @now_ms) } or return
        # The engines are read outside Redis' budget, each within its own
        # timeouts, so a hung engine costs its own series, not Redis'. One
        # that did not answer leaves its channels out (the series go
        # stale) rather than reporting them empty.
        list += off_budget { catalog.engine_channels(now_ms: @now_ms) }.reject { |c| c["unavailable"] }
        gauge("solid_jobs_channel_ready_jobs", "Jobs ready in the channel.",
              list.map { |c| [{"channel" => c["name"]}, c["depth"]] })
        # An empty channel's oldest job is 0 s old (nothing waits), as
        # Sidekiq reports queue latency; an undecodable head has no age.
        gauge("solid_jobs_channel_oldest_job_age_seconds", "How long the oldest ready job of the channel has waited.",
              list.filter_map do |c|
                age = c["depth"].to_i.zero? ? 0 : c["latency_s"]
                [{"channel" => c["name"]}, age] if age
              end)
        # A paused channel's backlog ages by design (docs/flow-control.md):
        # alerts on age can leave it out with `unless on(channel) ... == 1`.
        gauge("solid_jobs_channel_paused", "1 while the channel is paused (SolidJobs::Channels), else 0.",
              list.map { |c| [{"channel" => c["name"]}, c["paused"] ? 1 : 0] })
      end

      JOB_COUNTS = {
        "planned" => [:planned, "Jobs scheduled for later."],
        "retrying" => [:retrying, "Jobs waiting for their retry."],
        "archived" => [:archive, "Jobs in the archive (given up and kept)."]
      }.freeze

      def job_counts
        JOB_COUNTS.each do |name, (key, help)|
          count = read { @client.call(["ZCARD", @keys.public_send(key)]).to_i }
          gauge("solid_jobs_#{name}_jobs", help, [[{}, count]]) if count
        end
      end

      def counters
        values = read { @client.call(["MGET", *COUNTERS.values.map { |key, _| @keys.metric(key) }]) } or return
        COUNTERS.each_with_index do |(name, (_, help)), i|
          family(name, "counter", help, [[name, {}, values[i].to_i]])
        end
      end

      def nodes
        observed = read { Observations.new(client: @client, namespace: @config.namespace).nodes(now_ms: @now_ms) } or return
        ttls = read { observed.map { |n| @client.call(["PTTL", @keys.node(n["node_id"])]).to_i } } or return
        engine_only = off_budget { engine_only_nodes(observed.map { |n| n["node_id"] }) }
        node_gauges(observed, ttls, engine_only)
        HISTOGRAMS.each do |part, (name, help)|
          samples = observed.flat_map { |n| histogram_samples(name, n["node_id"], n.dig("histograms", part)) }
          family(name, "histogram", help, samples)
        end
      end

      # Redis' nodes from their observations and heartbeat keys; engine-only
      # nodes from their announcements (up while listed, the announcement's
      # age as the heartbeat's, the observation in short it carries).
      def node_gauges(observed, ttls, engine)
        gauge("solid_jobs_node_up", "1 while the node's heartbeat key lives, 0 once it expired (the node is dead or gone).",
              observed.map { |n| [id(n), n["alive"] ? 1 : 0] } + engine.map { |n| [id(n), 1] })
        gauge("solid_jobs_node_workers", "Workers of the node by state (busy: running a job; idle: waiting for one).",
              observed.flat_map { |n| n["at_ms"] ? workers(n) : [] } + engine.flat_map { |n| announced_workers(n) })
        gauge("solid_jobs_node_heartbeat_age_seconds", "Time since the node's last heartbeat.",
              observed.zip(ttls).filter_map { |n, ttl| heartbeat_age(n, ttl) } +
              engine.map { |n| [id(n), n["age_ms"] / 1000.0] })
        gauge("solid_jobs_node_observation_age_seconds", "Age of the node's latest observations.",
              observed.filter_map { |n| [id(n), n["age_ms"] / 1000.0] if n["age_ms"] } +
              engine.filter_map do |n|
                age = n["observed"]["age_ms"]
                age.is_a?(Integer) && n["age_ms"].is_a?(Integer) ? [id(n), (age + n["age_ms"]) / 1000.0] : nil
              end)
        gauge("solid_jobs_node_resident_memory_bytes", "Resident memory of the node's process (/proc/self/statm).",
              rss(observed.map { |n| [n, n["process"]] } + engine.map { |n| [n, n["observed"]["process"]] }))
        gauge("solid_jobs_engine_up", "1 when the SolidEngine backend answered this scrape's NODES, else 0.",
              @engines_up.map { |name, up| [{"backend" => name}, up] })
      end

      # Nodes whose channels are all on SolidEngine (listed by their
      # engines' NODES, not in Redis): [{"node_id", "age_ms", "observed"}].
      # Each engine is read on its own, so one that is down costs only its
      # nodes, and solid_jobs_engine_up says which.
      def engine_only_nodes(known)
        @engines_up = {}
        engine_backends.flat_map do |backend|
          list = backend.client.call(["NODES"])
          @engines_up[backend.name.to_s] = 1
          list.filter_map do |node_id, age_ms, _ttl_ms, description|
            next if known.include?(node_id)

            parsed = begin
              JSON.parse(description.to_s)
            rescue JSON::ParserError
              nil
            end
            observed = parsed.is_a?(Hash) && parsed["observed"].is_a?(Hash) ? parsed["observed"] : {}
            {"node_id" => node_id, "age_ms" => age_ms, "observed" => observed}
          end
        rescue ConnectionError, EngineError
          @engines_up[backend.name.to_s] = 0
          []
        end.uniq { |n| n["node_id"] }
      end

      def engine_backends
        SolidJobs.routing.backends.values.grep(Backends::SolidEngine)
      rescue StandardError # a routing that does not build: Redis only
        []
      end

      # [[node, process part], ...] => samples of the ones with an RSS.
      def rss(parts)
        parts.filter_map { |n, process| (rss = process.is_a?(Hash) && process["rss_bytes"]).is_a?(Integer) ? [id(n), rss] : nil }
      end

      # Workers counted by state in an engine-only node's announcement.
      def announced_workers(node)
        counts = node["observed"]["workers"]
        return [] unless counts.is_a?(Hash)

        totals = WORKER_STATES.values.to_h { |state| [state, 0] }
        # What a node announced is only trusted as far as its shape: a count
        # that is not an Integer is left out, never coerced.
        counts.each do |state, n|
          next unless state.is_a?(String) && n.is_a?(Integer)

          name = WORKER_STATES.fetch(state, state)
          totals[name] = totals.fetch(name, 0) + n
        end
        totals.map { |state, n| [id(node).merge("state" => state), n] }
      end

      def id(node) = {"node_id" => node["node_id"]}

      # Only for a node that wrote observations: one that has not (yet)
      # has no worker counts, not zero workers.
      def workers(node)
        counts = Hash.new(0)
        WORKER_STATES.each_value { |state| counts[state] = 0 }
        Array(node["ractors"]).each { |r| counts[WORKER_STATES.fetch(r["state"].to_s) { r["state"] || "unknown" }] += 1 }
        counts.map { |state, n| [id(node).merge("state" => state), n] }
      end

      def heartbeat_age(node, ttl_ms)
        age_ms = Nodes.heartbeat_age_ms(node["node"], ttl_ms) or return nil
        [id(node), age_ms / 1000.0]
      end

      # Cumulative buckets, `le` in seconds, +Inf last, from the per-bucket
      # counts a node wrote (histogram::Cumulative in solid_core).
      def histogram_samples(name, node_id, data)
        return [] unless data.is_a?(Hash) && data["le_us"].is_a?(Array) && data["counts"].is_a?(Array)

        labels = {"node_id" => node_id}
        seen = 0
        bounds = data["le_us"].map { |us| format_number(us / 1_000_000.0) } + ["+Inf"]
        buckets = bounds.zip(data["counts"]).map do |le, n|
          seen += n.to_i
          ["#{name}_bucket", labels.merge("le" => le), seen]
        end
        buckets + [["#{name}_sum", labels, data["sum_us"].to_i / 1_000_000.0], ["#{name}_count", labels, seen]]
      end

      def gauge(name, help, samples)
        family(name, "gauge", help, samples.map { |labels, value| [name, labels, value] })
      end

      # One family: HELP and TYPE even without samples, so every family a
      # scrape could show is declared.
      def family(name, type, help, samples)
        lines = +"# HELP #{name} #{escape_help(help)}\n# TYPE #{name} #{type}\n"
        samples.each do |sample_name, labels, value|
          lines << sample_name << label_text(labels) << " " << format_number(value) << "\n"
        end
        @families << lines
      end

      def label_text(labels)
        return "" if labels.empty?

        "{#{labels.map { |k, v| %(#{k}="#{escape_label(v.to_s)}") }.join(",")}}"
      end

      # The format's escapes: label values escape backslash, double quote
      # and newline; HELP text backslash and newline.
      def escape_label(value) = value.gsub(/[\\"\n]/) { |c| c == "\n" ? "\\n" : "\\#{c}" }
      def escape_help(text) = text.gsub(/[\\\n]/) { |c| c == "\n" ? "\\n" : "\\\\" }

      def format_number(value)
        case value
        when Integer then value.to_s
        when Float then value.finite? ? value.to_s : non_finite(value)
        else value.to_s
        end
      end

      def monotonic = Process.clock_gettime(Process::CLOCK_MONOTONIC)

      def non_finite(value)
        return "NaN" if value.nan?

        value.positive? ? "+Inf" : "-Inf"
      end

      # Time spent reading SolidEngine backends does not count against
      # Redis' budget (see #read).
      def off_budget
        started = monotonic
        yield
      ensure
        @off_budget_s = @off_budget_s.to_f + (monotonic - started)
      end

      # Runs a read unless one failed already (so one timeout bounds the
      # scrape's Redis reads); nil when it fails or is skipped.
      def read
        return nil if @error

        spent = monotonic - @started - @off_budget_s.to_f
        if spent > @budget_s
          @error = format("the scrape spent %.1f s (more than read_timeout, %.1f s) and stopped reading", spent, @budget_s)
          return nil
        end
        yield
      rescue StandardError => e
        @error = SolidJobs::Native.redact("#{e.class}: #{e.message}")
        nil
      end
    end
  end
end
