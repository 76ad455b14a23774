# frozen_string_literal: true

module SolidJobs
  # Process-wide settings. Every setter validates, so a bad value fails at
  # configure time with a ConfigurationError naming the setting.
  class Configuration
    CHANNEL_ORDERS = %i[weighted priority shuffle].freeze
    EXECUTION_MODES = %i[ractor thread].freeze
    TASK_OPTION_KEYS = %i[channel max_failures retry_within execution].freeze
    # `execution: :thread` sends a task to the node's thread workers (see Lanes).
    TASK_EXECUTIONS = %i[thread].freeze
    CHANNEL_NAME = /\A[A-Za-z0-9_.-]{1,100}\z/

    # Defaults, each with the reason for its value.
    DEFAULTS = {
      # Local Redis, database 0; SOLID_JOBS_REDIS_URL replaces this default.
      redis_url: "redis://127.0.0.1:6379/0",
      # Every key lives under this prefix (docs/keyspace.md).
      namespace: "solid_jobs",
      channels: [["default", 1]],
      channel_order: :weighted,
      # Twice the cores of a typical small host; Ractors scale with cores.
      concurrency: 8,
      # Below the 30 s most process supervisors wait between TERM and KILL.
      shutdown_timeout: 25,
      execution_mode: :ractor,
      # Thread workers beside the worker Ractors, for tasks that cannot run in
      # a Ractor (Active Job, the warm pool, `execution: :thread`). nil: sized
      # by SolidJobs::Lanes (5 when Rails or such a task is loaded, else 0).
      thread_concurrency: nil,
      # Sidekiq users expect 25 attempts over a few days (see backoff).
      default_task_options: {channel: "default", max_failures: 25},
      # How often a node proves it is alive.
      heartbeat_interval: 5,
      # A node silent this long is dead; its claims are recovered by others.
      recovery_delay: 30,
      archive_max_entries: 10_000,
      archive_max_age: 30 * 24 * 3600,
      # Which backend serves channels not listed in channel_backends.
      backend: :redis,
      # Named backend specs: {name => {adapter: :solid_redis | :solid_engine, url:, ...}}.
      backends: {}.freeze,
      # {channel => backend name}
      channel_backends: {}.freeze,
      # Shortcut with backend = :solid_engine: the engine's unix:// or tcp:// URL.
      url: nil,
      # Receives instrument(name, payload) for every lifecycle event
      # (docs/observability.md). The default does nothing and costs nothing.
      instrumenter: Instrumentation::NULL,
      # Seconds between a node's process, Ractor and Redis observations.
      observation_interval: 5,
      # Telemetry written to Redis: the journal (`<namespace>:telemetry`,
      # exact per-second aggregates and sampled job lifecycles) and each
      # node's observations. Off: neither is written (the instrumenter and
      # node control still work).
      telemetry: true,
      # Entries the journal stream keeps (approximately: MAXLEN ~).
      telemetry_journal_size: 10_000,
      # Jobs per second per process whose whole lifecycle is journaled; a
      # few per second show what jobs go through without weighing on a busy
      # node. Aggregates count every job regardless.
      telemetry_sample_rate: 10,
      # Seconds to wait for a TCP connection to Redis or SolidEngine, and
      # for a request to be written and its reply read. A call that waits
      # longer fails with ConnectionError (an enqueue wrote nothing, or its
      # outcome is unknown and a retry is deduplicated by job id); worker
      # threads reconnect with backoff. Far above any healthy command (the
      # slowest take milliseconds) and far below recovery_delay, so a hung
      # Redis shows within seconds (docs/reliability.md, "Timeouts").
      connect_timeout: 2,
      read_timeout: 5,
      write_timeout: 5,
      # Seconds a publication may stay behind its barrier (custom
      # instrumenter only) before a node's heartbeat releases it anyway, so
      # a publisher that dies mid-publication never strands its jobs.
      publication_barrier_ttl: 10
    }.freeze

    attr_reader(*DEFAULTS.keys, :prefetch, :publish_interceptors, :execute_interceptors)

    def initialize
      DEFAULTS.each { |key, value| instance_variable_set(:"@#{key}", value) }
      @redis_url = ENV.fetch("SOLID_JOBS_REDIS_URL", DEFAULTS[:redis_url])
      # SOLID_JOBS_TELEMETRY=off: no journal and no observations in Redis by
      # default (a process or a measurement that wants only the job path).
      @telemetry = !%w[off false 0 no].include?(ENV.fetch("SOLID_JOBS_TELEMETRY", "on").downcase)
      @prefetch = nil
      @publish_interceptors = InterceptorChain.new
      @execute_interceptors = InterceptorChain.new
    end

    def redis_url=(url)
      unless url.is_a?(String) && url.match?(%r{\A(redis|rediss|unix)://}i)
        invalid!(:redis_url, url, "a redis://, rediss:// or unix:// URL")
      end
      @redis_url = url
    end

    def namespace=(value)
      invalid!(:namespace, value, "a non-empty String without spaces") unless value.is_a?(String) && value.match?(/\A\S+\z/)
      @namespace = value
    end

    # Accepts "name", ["name", weight] or "name,weight" entries.
    def channels=(list)
      valid = list.is_a?(Array) && !list.empty?
      invalid!(:channels, list, "a non-empty Array of channel names or [name, weight] pairs") unless valid
      normalized = list.map { |entry| self.class.parse_channel(entry) }
      dupes = normalized.map(&:first).tally.select { |_, n| n > 1 }.keys
      invalid!(:channels, list, "each channel once (repeated: #{dupes.join(", ")})") unless dupes.empty?
      @channels = normalized.freeze
    end

    def self.parse_channel(entry)
      name, weight = entry.is_a?(String) ? entry.split(",", 2) : Array(entry)
      name = name.to_s
      weight = weight.nil? ? 1 : Integer(weight, exception: false)
      unless name.match?(CHANNEL_NAME) && weight.is_a?(Integer) && weight.positive?
        raise ConfigurationError, "invalid channel #{entry.inspect}: expected a name of 1-100 characters " \
                                  "from A-Z a-z 0-9 _ - . and an optional positive integer weight"
      end
      [name.freeze, weight].freeze
    end

    def channel_order=(value)
      invalid!(:channel_order, value, "one of #{CHANNEL_ORDERS.join(", ")}") unless CHANNEL_ORDERS.include?(value&.to_sym)
      @channel_order = value.to_sym
    end

    def concurrency=(value)
      invalid!(:concurrency, value, "an Integer from 1 to 1024") unless value.is_a?(Integer) && value.between?(1, 1024)
      @concurrency = value
    end

    def thread_concurrency=(value)
      valid = value.nil? || (value.is_a?(Integer) && value.between?(0, 1024))
      invalid!(:thread_concurrency, value, "nil or an Integer from 0 to 1024") unless valid
      @thread_concurrency = value
    end

    # Unstarted jobs a node keeps claimed for its workers. nil (default):
    # adaptive, about 10 ms of work per worker from the measured job
    # duration plus twice the measured claim round trip (up to 2,048); an
    # Integer fixes the window.
    def prefetch=(value)
      valid = value.nil? || (value.is_a?(Integer) && value.between?(1, 10_000))
      invalid!(:prefetch, value, "nil or an Integer from 1 to 10000") unless valid
      @prefetch = value
    end

    def shutdown_timeout=(value)
      positive_number!(:shutdown_timeout, value, allow_zero: true)
      @shutdown_timeout = value
    end

    def connect_timeout=(value)
      positive_number!(:connect_timeout, value)
      @connect_timeout = value
    end

    def read_timeout=(value)
      positive_number!(:read_timeout, value)
      @read_timeout = value
    end

    def write_timeout=(value)
      positive_number!(:write_timeout, value)
      @write_timeout = value
    end

    # The connection timeouts as the native constructors take them.
    def timeouts
      {connect: connect_timeout.to_f, read: read_timeout.to_f, write: write_timeout.to_f}
    end

    def heartbeat_interval=(value)
      positive_number!(:heartbeat_interval, value)
      @heartbeat_interval = value
    end

    def recovery_delay=(value)
      positive_number!(:recovery_delay, value)
      @recovery_delay = value
    end

    def archive_max_entries=(value)
      invalid!(:archive_max_entries, value, "a positive Integer") unless value.is_a?(Integer) && value.positive?
      @archive_max_entries = value
    end

    def archive_max_age=(value)
      positive_number!(:archive_max_age, value)
      @archive_max_age = value
    end

    def backend=(value)
      valid = value.is_a?(Symbol) || value.is_a?(String)
      invalid!(:backend, value, "a backend name (Symbol), e.g. :redis or :solid_engine") unless valid
      @backend = value.to_sym
    end

    def backends=(specs)
      valid = specs.is_a?(Hash) && specs.values.all? { |spec| spec.is_a?(Hash) && spec.key?(:adapter) }
      invalid!(:backends, specs, "a Hash of name => {adapter: :solid_redis | :solid_engine, url: ...}") unless valid
      @backends = specs.to_h { |name, spec| [name.to_sym, spec.dup.freeze] }.freeze
    end

    def channel_backends=(map)
      invalid!(:channel_backends, map, "a Hash of channel name => backend name") unless map.is_a?(Hash)
      @channel_backends = map.to_h { |channel, name| [channel.to_s.freeze, name.to_sym] }.freeze
    end

    def url=(value)
      valid = value.nil? || (value.is_a?(String) && value.match?(%r{\A(unix|tcp)://}i))
      invalid!(:url, value, "a unix:///path or tcp://host:port URL") unless valid
      @url = value
    end

    def instrumenter=(value)
      @instrumenter = Instrumentation.shareable!(value)
    end

    def observation_interval=(value)
      positive_number!(:observation_interval, value)
      @observation_interval = value
    end

    def telemetry=(value)
      invalid!(:telemetry, value, "true or false") unless [true, false].include?(value)
      @telemetry = value
    end

    def telemetry_journal_size=(value)
      invalid!(:telemetry_journal_size, value, "an Integer of at least 100") unless value.is_a?(Integer) && value >= 100
      @telemetry_journal_size = value
    end

    def telemetry_sample_rate=(value)
      valid = value.is_a?(Integer) && value.between?(0, 10_000)
      invalid!(:telemetry_sample_rate, value, "an Integer from 0 to 10000") unless valid
      @telemetry_sample_rate = value
    end

    def publication_barrier_ttl=(value)
      positive_number!(:publication_barrier_ttl, value)
      @publication_barrier_ttl = value
    end

    def execution_mode=(value)
      invalid!(:execution_mode, value, "one of #{EXECUTION_MODES.join(", ")}") unless EXECUTION_MODES.include?(value&.to_sym)
      @execution_mode = value.to_sym
    end

    def default_task_options=(options)
      invalid!(:default_task_options, options, "a Hash") unless options.is_a?(Hash)
      @default_task_options = self.class.validate_task_options(DEFAULTS[:default_task_options].merge(options)).freeze
    end

    def self.validate_task_options(options)
      unknown = options.keys - TASK_OPTION_KEYS
      unless unknown.empty?
        raise ConfigurationError, "unknown task option(s) #{unknown.inspect}; known: #{TASK_OPTION_KEYS.inspect}"
      end
      if options.key?(:channel) && !options[:channel].to_s.match?(CHANNEL_NAME)
        raise ConfigurationError, "task option channel #{options[:channel].inspect} is not a valid channel name"
      end

      max_failures = options[:max_failures]
      if options.key?(:max_failures) && !(max_failures.is_a?(Integer) && max_failures.between?(1, 1_000_000))
        raise ConfigurationError, "task option max_failures must be an Integer from 1 to 1000000 (got #{max_failures.inspect})"
      end

      within = options[:retry_within]
      if options.key?(:retry_within) && !(within.is_a?(Numeric) && within.positive? && within.finite?)
        raise ConfigurationError, "task option retry_within must be a positive number of seconds (got #{within.inspect})"
      end

      if options.key?(:execution) && !TASK_EXECUTIONS.include?(options[:execution])
        raise ConfigurationError,
              "task option execution must be one of #{TASK_EXECUTIONS.inspect} (got #{options[:execution].inspect})"
      end

      options.to_h { |k, v| [k, k == :channel ? v.to_s.freeze : v] }
    end

    def validate!
      if recovery_delay <= heartbeat_interval
        raise ConfigurationError,
              "recovery_delay (#{recovery_delay}) must be longer than heartbeat_interval (#{heartbeat_interval})"
      end

      self
    end

    private

    def positive_number!(name, value, allow_zero: false)
      ok = value.is_a?(Numeric) && value.finite? && (allow_zero ? value >= 0 : value.positive?)
      invalid!(name, value, allow_zero ? "a number of seconds >= 0" : "a positive number of seconds") unless ok
    end

    def invalid!(name, value, expected)
      raise ConfigurationError, "invalid #{name} #{value.inspect}: expected #{expected}"
    end
  end
end
