# frozen_string_literal: true

module SolidJobs
  class Web
    # What one request reads, read at most once per request (pages and
    # their JSON share it). Every read that fails becomes Unavailable with
    # the reason, so a page renders what it has and says what it lacks:
    # nothing is guessed, and one broken source does not blank the page.
    #
    # Reads go through the read APIs (Catalog, Observations,
    # Telemetry::Journal, Console; docs/observability.md), which return
    # String-keyed Hashes without arguments; #job keeps, besides, only the
    # fields a page shows.
    class Snapshot
      Unavailable = Struct.new(:reason)

      # Entries read from the telemetry journal per request: the whole
      # journal at its default size (telemetry_journal_size), no more.
      JOURNAL_READ = 10_000
      # Chart windows: the shortest that reaches back to the oldest entry
      # read. A busy node journals about 60 entries a second (sampled
      # lifecycles plus metrics), so the journal then holds a few minutes,
      # and charts zoom in rather than show mostly gaps.
      WINDOWS_MS = [60_000, 120_000, 300_000, 600_000].freeze

      # The fields of a job record a page may show. Arguments, envelopes,
      # error messages and backtraces are not among them.
      JOB_FIELDS = %w[id state channel backend task max_failures created_ms queued_ms failures first_failure_ms
                      last_failure_ms error_class reason kind discarded_ms retained completions_since unique].freeze

      attr_reader :now_ms

      def initialize(now_ms: Clock.now_ms)
        @now_ms = now_ms
        @memo = {}
      end

      def window_ms
        entries = journal
        return WINDOWS_MS.last if unavailable?(entries) || entries.empty?

        span = now_ms - entries.first["at_ms"].to_i
        WINDOWS_MS.find { |w| w >= span } || WINDOWS_MS.last
      end

      # The journal as chart buckets (nil when the journal is unavailable).
      def series
        return nil if unavailable?(journal)

        # A node still counts as reporting while its observations would be fresh.
        grace_ms = Observations.fresh_for_ms
        @series ||= Series.new(journal, now_ms: now_ms, window_ms: window_ms, grace_ms: grace_ms)
      end

      # [{"name", "depth", "latency_s"}]
      def channels
        read(:channels) { Catalog.new.channels(now_ms: now_ms).sort_by { |c| c["name"].to_s } }
      end

      # {"planned", "retrying", "archived", "publishing"}: each an Integer
      # or Unavailable ("publishing": publications held by a barrier).
      def counts
        @memo[:counts] ||= begin
          catalog = read(:catalog) { Catalog.new }
          %w[planned retrying archived publishing].to_h do |name|
            [name, unavailable?(catalog) ? catalog : read(:"count_#{name}") { catalog.public_send(:"#{name}_count") }]
          end
        end
      end

      # Observations per live node: {"node_id", "node", "process", "ractors",
      # "redis", ...} with freshness (age_ms, fresh) per part, as the
      # Observations API reports them.
      def nodes
        read(:nodes) { Observations.new.nodes(now_ms: now_ms) }
      end

      # Decoded journal entries, oldest first.
      def journal
        read(:journal) do
          count = [SolidJobs.config.telemetry_journal_size, JOURNAL_READ].min
          entries = journal_api.entries(count: count)
          entries.sort_by { |e| [e["at_ms"].to_i, e["seq"].to_i] }
        end
      end

      def gaps
        read(:gaps) do
          entries = journal
          raise UnavailableError, entries.reason if unavailable?(entries)

          journal_api.gaps(entries)
        end
      end

      def freshness
        read(:freshness) { journal_api.freshness(now_ms: now_ms) }
      end

      # A job's current record, restricted to JOB_FIELDS (nil: not found).
      def job(id)
        read(:"job_#{id}") do
          Console.new.find(id)&.slice(*JOB_FIELDS)
        end
      end

      # Task names seen by nodes, publishers and in the archive (Catalog#tasks).
      def task_names
        read(:task_names) { Catalog.new.tasks }
      end

      # One page of the archive (Console#archive_page), filtered: an
      # Archive::Page whose entries keep only JOB_FIELDS.
      def archive_page(task: nil, error_class: nil, channel: nil, cursor: nil, limit: 50)
        read(:"archive_#{[task, error_class, channel, cursor, limit].inspect}") do
          page = Console.new.archive_page(task: task, error_class: error_class, channel: channel, limit: limit, cursor: cursor)
          Archive::Page.new(page.entries.map { |r| r.slice(*JOB_FIELDS) }, page.next_cursor, page.scanned)
        end
      end

      # The SolidEngine backends this process routes to, each read with the
      # backend's configured timeouts: {"name", "url" (redacted), "stats"
      # (STATS as a Hash) , "nodes" (NODES: [{"node_id", "age_ms",
      # "ttl_ms", "node"}])}, each part possibly Unavailable.
      def engines
        @memo[:engines] ||= engine_backends.map do |backend|
          {"name" => backend.name.to_s, "url" => redact(backend.client.url.to_s),
           "stats" => read(:"engine_stats_#{backend.name}") { engine_stats(backend) },
           "nodes" => read(:"engine_nodes_#{backend.name}") { engine_nodes(backend) }}
        end
      end

      # Nodes that announced themselves to a SolidEngine (NODE, every
      # heartbeat) and have no observations in Redis: those whose channels
      # are all on SolidEngine. A node on both is shown once, from Redis,
      # which holds more. Each entry also names its "backend".
      def engine_only_nodes
        @memo[:engine_only_nodes] ||= begin
          observed = nodes
          known = unavailable?(observed) ? [] : observed.map { |n| n["node_id"] }
          engines.flat_map do |e|
            list = e["nodes"]
            unavailable?(list) ? [] : list.map { |n| n.merge("backend" => e["name"]) }
          end.reject { |n| known.include?(n["node_id"]) }.uniq { |n| n["node_id"] }
        end
      end

      # Dead jobs of one SolidEngine backend (Console#engine_dead), JOB_FIELDS only.
      def engine_dead(name, **filters)
        backend = engine_backends.find { |b| b.name.to_s == name.to_s }
        read(:"engine_dead_#{name}_#{filters.sort.inspect}") do
          Console.new.engine_dead(backend, limit: 100, **filters).map { |r| r.slice(*JOB_FIELDS, "attempts") }
        end
      end

      # A configuration whose routing does not build has no engines to
      # read; the job pages say why (Console reads the routing too).
      def engine_backends
        @engine_backends ||= begin
          SolidJobs.routing.backends.values.grep(Backends::SolidEngine)
        rescue StandardError
          []
        end
      end

      # The dashboard's own view of Redis: round-trip time and INFO.
      def redis_server
        read(:redis_server) do
          started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
          SolidJobs.client.call(["PING"])
          rtt_ms = (Process.clock_gettime(Process::CLOCK_MONOTONIC) - started) * 1000
          info = SolidJobs.client.call(["INFO"]).to_s.lines.each_with_object({}) do |line, all|
            key, value = line.strip.split(":", 2)
            all[key] = value if value && !key.start_with?("#")
          end
          {"rtt_ms" => rtt_ms, "info" => info}
        end
      end

      # Concurrency keys in use (Catalog#concurrency_keys).
      def concurrency_keys
        read(:concurrency_keys) { Catalog.new.concurrency_keys }
      end

      # Rate keys in use (Catalog#rate_keys).
      def rate_keys
        read(:rate_keys) { Catalog.new.rate_keys }
      end

      # The recurring schedules (SolidJobs::Recurring.status): next run,
      # last tick, last job; state left by removed schedules too.
      def recurring
        read(:recurring) { Recurring.status.map(&:to_h) }
      end

      def unavailable?(value) = value.is_a?(Unavailable)

      private

      class UnavailableError < StandardError; end

      def journal_api = @journal_api ||= Telemetry::Journal.new

      def engine_stats(backend)
        backend.client.call(["STATS"]).to_s.lines.to_h do |line|
          key, value = line.strip.split(":", 2)
          [key, value&.match?(/\A\d+\z/) ? value.to_i : value]
        end
      end

      # Descriptions are the nodes' own JSON (as in Redis's node key); one
      # that does not parse is shown as unavailable, never guessed.
      def engine_nodes(backend)
        backend.client.call(["NODES"]).map do |node_id, age_ms, ttl_ms, description|
          node = begin
            parsed = JSON.parse(description.to_s)
            parsed.is_a?(Hash) ? parsed : {"state" => "unavailable"}
          rescue JSON::ParserError
            {"state" => "unavailable"}
          end
          {"node_id" => node_id, "age_ms" => age_ms, "ttl_ms" => ttl_ms, "node" => node}
        end
      end

      def read(key)
        return @memo[key] if @memo.key?(key)

        @memo[key] = begin
          yield
        rescue UnavailableError => e
          Unavailable.new(e.message)
        rescue StandardError => e
          Unavailable.new(redact("#{e.class}: #{e.message}"))
        end
      end

      # Errors may quote the Redis URL; its password stays out of the page
      # (the one redaction rule, shared with logs and exceptions).
      def redact(text) = SolidJobs::Native.redact(text)
    end
  end
end
