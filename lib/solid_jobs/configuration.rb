# frozen_string_literal: true

module SolidJobs
  # Process-wide settings. Every setter validates, so a bad value fails at
  # configure time with a ConfigurationError naming the setting; settings
  # that depend on each other (backends and routing) are checked by
  # validate!, at the end of SolidJobs.configure. Setters keep their own
  # frozen copies of what they are given, so nothing of the caller's is
  # frozen when the configuration is made shareable for worker Ractors.
  class Configuration
    CHANNEL_ORDERS = %i[weighted priority shuffle].freeze
    EXECUTION_MODES = %i[ractor thread].freeze
    TASK_OPTION_KEYS = %i[channel max_failures retry_within execution unique recurring concurrency priority rate].freeze
    # `concurrency: {limit:, key:, group:}` (docs/flow-control.md).
    CONCURRENCY_KEYS = %i[limit key group].freeze
    CONCURRENCY_MAX = 10_000
    CONCURRENCY_GROUP = /\A[A-Za-z0-9_:.-]{1,100}\z/
    # `rate: {limit:, per:, key:, group:, slack:}` (docs/flow-control.md
    # "Rate limits"): `per` and `slack` in seconds.
    RATE_KEYS = %i[limit per key group slack].freeze
    RATE_MAX = 10_000
    RATE_PER = (1..86_400)
    # `unique: {by:, while:, for:}` (docs/unique.md).
    UNIQUE_KEYS = %i[by while for].freeze
    UNIQUE_MODES = %i[queued running until_done].freeze
    UNIQUE_MAX_FOR = 366 * 24 * 3600
    # `execution: :thread` sends a task to the node's thread workers (see Lanes).
    TASK_EXECUTIONS = %i[thread].freeze
    CHANNEL_NAME = /\A[A-Za-z0-9_.-]{1,100}\z/
    # The keys each backend adapter takes (README "Backends"); :redis is an
    # alias of :solid_redis.
    BACKEND_KEYS = {
      solid_redis: %i[adapter url].freeze,
      solid_engine: %i[adapter url password lease channel_ids].freeze
    }.freeze
    ADAPTER_ALIASES = {redis: :solid_redis}.freeze
    # SolidEngine channel ids are unsigned 32-bit integers (docs/protocol.md).
    ENGINE_CHANNEL_IDS = (0..0xFFFF_FFFF)

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
      # Seconds a job whose task the worker does not know is retried before
      # it is archived: producers often deploy before workers (a rolling
      # deploy), and the jobs should wait for the code rather than need
      # re-enqueueing. 0 archives them at once.
      unknown_task_retry_for: 15 * 60,
      # The archive's limits (entries, seconds): solid_core's defaults.
      archive_max_entries: Native::ARCHIVE_MAX_ENTRIES,
      archive_max_age: Native::ARCHIVE_MAX_AGE,
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
      publication_barrier_ttl: 10,
      # Lines below this level are not written (debug adds a line as each
      # job starts and finishes); SOLID_JOBS_LOG_LEVEL replaces this default.
      log_level: :info,
      # text (one readable line) or json (one object per line, for log
      # shippers); SOLID_JOBS_LOG_FORMAT replaces this default.
      log_format: :text,
      # {name => {task:, every: | cron:, time_zone:, arguments:, channel:,
      # missed:}}: recurring schedules (docs/recurring.md), run by every
      # node's scheduler, one enqueue per tick however many nodes.
      recurring: {}.freeze,
      # Whether this node runs the recurring scheduler (opt-out per node:
      # --no-scheduler). Any number of nodes may; one suffices.
      scheduler: true,
      # Maps an Active Job priority onto 0..9 (nil: the built-in monotone
      # table, SolidJobs::ActiveJob::PRIORITY_TABLE; docs/flow-control.md).
      active_job_priority: nil
    }.freeze
    LOG_LEVELS = Log::LEVELS.keys.freeze

    attr_reader(*DEFAULTS.keys, :prefetch, :publish_interceptors, :execute_interceptors)

    def initialize
      DEFAULTS.each { |key, value| instance_variable_set(:"@#{key}", value) }
      @redis_url = ENV.fetch("SOLID_JOBS_REDIS_URL", DEFAULTS[:redis_url])
      # SOLID_JOBS_TELEMETRY=off: no journal and no observations in Redis by
      # default (a process or a measurement that wants only the job path).
      @telemetry = !%w[off false 0 no].include?(ENV.fetch("SOLID_JOBS_TELEMETRY", "on").downcase)
      @log_level = self.class.env_choice("SOLID_JOBS_LOG_LEVEL", LOG_LEVELS, DEFAULTS[:log_level])
      @log_format = self.class.env_choice("SOLID_JOBS_LOG_FORMAT", Log::FORMATS, DEFAULTS[:log_format])
      @logger_given = false
      @logger = nil
      @prefetch = nil
      @publish_interceptors = InterceptorChain.new
      @execute_interceptors = InterceptorChain.new
    end

    # A copy to build the next configuration on (SolidJobs.configure): the
    # interceptor chains are the only state a setter changes in place, so
    # they are copied too; every other value is frozen and shared.
    def initialize_copy(source)
      super
      @publish_interceptors = source.publish_interceptors.dup
      @execute_interceptors = source.execute_interceptors.dup
    end

    # Short and redacted. Ruby 3.1 quotes the receiver's inspect in a
    # NoMethodError (`config.concurency = 3`), and consoles print it: it
    # must never dump every setting, and never a password.
    def inspect
      Native.redact("#<#{self.class.name} backend=#{backend.inspect} redis_url=#{redis_url.inspect} " \
                    "namespace=#{namespace.inspect}#{" url=#{url.inspect}" if url}#{" (frozen)" if frozen?}>")
    end

    def pretty_print(printer) = printer.text(inspect)

    def redis_url=(url)
      unless url.is_a?(String) && url.match?(%r{\A(redis|rediss|unix)://}i)
        invalid!(:redis_url, url, "a redis://, rediss:// or unix:// URL")
      end
      @redis_url = self.class.checked_url(:redis, :redis_url, url)
    end

    def namespace=(value)
      invalid!(:namespace, value, "a non-empty String without spaces") unless value.is_a?(String) && value.match?(/\A\S+\z/)
      @namespace = self.class.own(value)
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
      [own(name), weight].freeze
    end

    # A frozen String of our own with the contents of `value`: the
    # caller's object is never the one frozen.
    def self.own(value) = String.new(value.to_s).freeze

    # `url` after the check the backend's client will run on it (the same
    # parser, no connection), as a frozen copy; ConfigurationError names
    # `setting` otherwise.
    def self.checked_url(kind, setting, url)
      raise ConfigurationError, "invalid #{setting} #{url.inspect}: expected a URL String" unless url.is_a?(String)

      kind == :engine ? Native.check_engine_url(url) : Native.check_redis_url(url)
      own(url)
    rescue ArgumentError => e
      raise ConfigurationError, "invalid #{setting} #{url.inspect}: #{e.message}"
    end

    def channel_order=(value)
      @channel_order = choice!(:channel_order, value, CHANNEL_ORDERS)
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

    def unknown_task_retry_for=(value)
      positive_number!(:unknown_task_retry_for, value, allow_zero: true)
      @unknown_task_retry_for = value
    end

    def archive_max_entries=(value)
      invalid!(:archive_max_entries, value, "a positive Integer") unless value.is_a?(Integer) && value.positive?
      @archive_max_entries = value
    end

    def archive_max_age=(value)
      positive_number!(:archive_max_age, value)
      @archive_max_age = value
    end

    # Which backend serves channels not listed in channel_backends: :redis,
    # :solid_engine (with config.url) or a name from config.backends;
    # validate! checks that it exists.
    def backend=(value)
      @backend = self.class.backend_name(:backend, value)
    end

    # Named backend specs, each checked whole here: a known adapter, only
    # the keys that adapter takes, a URL its client opens, a positive
    # lease, valid channel ids. Stored as frozen copies.
    def backends=(specs)
      invalid!(:backends, specs, "a Hash of name => {adapter: :solid_redis | :solid_engine, url: ...}") unless specs.is_a?(Hash)
      @backends = specs.to_h do |name, spec|
        name = self.class.backend_name(:backends, name)
        [name, self.class.backend_spec(name, spec)]
      end.freeze
    end

    # {channel => backend name}; validate! checks that each backend exists.
    def channel_backends=(map)
      invalid!(:channel_backends, map, "a Hash of channel name => backend name") unless map.is_a?(Hash)
      @channel_backends = map.to_h do |channel, name|
        unless channel.is_a?(String) || channel.is_a?(Symbol)
          raise ConfigurationError, "invalid channel_backends key #{channel.inspect}: expected a channel name"
        end

        unless channel.to_s.match?(CHANNEL_NAME)
          raise ConfigurationError, "invalid channel_backends key #{channel.to_s.inspect}: expected a channel name of " \
                                    "1-100 characters from A-Z a-z 0-9 _ - ."
        end
        [self.class.own(channel), self.class.backend_name("channel_backends[#{channel.to_s.inspect}]", name)]
      end.freeze
    end

    def url=(value)
      valid = value.nil? || (value.is_a?(String) && value.match?(%r{\A(unix|tcp)://}i))
      invalid!(:url, value, "a unix:///path or tcp://host:port URL") unless valid
      @url = value && self.class.checked_url(:engine, :url, value)
    end

    # Checked here, changing nothing: ConfigurationError when worker
    # Ractors could not share it. SolidJobs.configure deep-freezes it once
    # the whole block has succeeded (a Conductor does at start otherwise).
    def instrumenter=(value)
      @instrumenter = Instrumentation.check!(value)
    end

    # A Proc taking Active Job's priority (an Integer or nil) and returning
    # 0..9; called in the producer at each enqueue.
    def active_job_priority=(value)
      invalid!(:active_job_priority, value, "a Proc (or nil)") unless value.nil? || value.is_a?(Proc)
      @active_job_priority = value
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

    def log_level=(value)
      valid = (value.is_a?(Symbol) || value.is_a?(String)) && LOG_LEVELS.include?(value.to_sym.downcase)
      invalid!(:log_level, value, "one of #{LOG_LEVELS.join(", ")}") unless valid
      @log_level = value.to_sym.downcase
      Log.level = @log_level if installed?
    end

    def log_format=(value)
      valid = (value.is_a?(Symbol) || value.is_a?(String)) && Log::FORMATS.include?(value.to_sym.downcase)
      invalid!(:log_format, value, "one of #{Log::FORMATS.join(", ")}") unless valid
      @log_format = value.to_sym.downcase
      Log.format = @log_format if installed?
    end

    # Any object with Logger's `add(severity, message)` (nil: stderr again).
    # It is not kept in the configuration, which worker Ractors share and a
    # Logger cannot be: SolidJobs.configure (or a node's start) hands it to
    # SolidJobs::Log, which gives it every line from one main-Ractor thread.
    def logger=(value)
      unless value.nil? || Kernel.instance_method(:respond_to?).bind_call(value, :add)
        invalid!(:logger, value, "an object with Logger's interface (add(severity, message)), or nil")
      end
      @logger_given = true
      @logger = value
      Log.apply(self) if installed?
    end

    # The logger lines go to (main Ractor only).
    def logger = @logger_given ? @logger : Log.logger

    # [given, logger], once: the logger set since the last take (Log.apply).
    def take_logger
      return [false, nil] unless @logger_given

      given = [true, @logger]
      @logger_given = false
      @logger = nil
      given
    end

    # The value of `var` when it names one of `choices`, else `default`: a
    # typo in the environment must not stop a process (a setter refuses it).
    def self.env_choice(var, choices, default)
      value = ENV.fetch(var, "").downcase.to_sym
      choices.include?(value) ? value : default
    end

    # Each entry checked whole here (SolidJobs::Recurring.spec): a bad cron,
    # an unknown key or arguments that are not JSON-native fail at
    # configure, naming the schedule.
    def recurring=(schedules)
      invalid!(:recurring, schedules, "a Hash of schedule name => {task:, every: | cron:, ...}") unless schedules.is_a?(Hash)
      @recurring = schedules.to_h do |name, spec|
        checked = Recurring.spec(name, spec)
        [checked[:name], checked]
      end.freeze
    end

    def scheduler=(value)
      invalid!(:scheduler, value, "true or false") unless [true, false].include?(value)
      @scheduler = value
    end

    def execution_mode=(value)
      @execution_mode = choice!(:execution_mode, value, EXECUTION_MODES)
    end

    def default_task_options=(options)
      invalid!(:default_task_options, options, "a Hash") unless options.is_a?(Hash)
      if options.key?(:recurring)
        raise ConfigurationError, "recurring is not a default task option (it would make every task a schedule); " \
                                  "set it on the task, or use config.recurring"
      end
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

      options = options.merge(unique: unique_option(options[:unique])) if options.key?(:unique)
      if options[:unique] && options[:recurring]
        # A tick is enqueued by recurring.lua, which takes no lock: refused
        # rather than silently not unique.
        raise ConfigurationError, "task options unique and recurring cannot be combined yet: recurring ticks are " \
                                  "enqueued without a unique lock (docs/unique.md)"
      end
      options = options.merge(concurrency: concurrency_option(options[:concurrency])) if options.key?(:concurrency)
      check_priority_option(options)
      options = options.merge(rate: rate_option(options[:rate])) if options.key?(:rate)
      options.to_h do |k, v|
        [k, case k
            when :channel then own(v)
            when :recurring then Recurring.task_option(v)
            else v
            end]
      end
    end

    # `priority:` 0 (first) .. 9 (last), 5 the default (docs/flow-control.md,
    # "Priorities").
    def self.check_priority_option(options)
      return unless options.key?(:priority)

      priority = options[:priority]
      unless priority.is_a?(Integer) && priority.between?(0, 9)
        raise ConfigurationError, "task option priority must be an Integer from 0 (runs first) to 9 (runs last), " \
                                  "5 by default (got #{priority.inspect})"
      end
      return unless options[:recurring] && priority != 5

      # recurring.lua enqueues the tick to the channel's base list: refused
      # rather than silently run at priority 5.
      raise ConfigurationError, "task options priority and recurring cannot be combined yet: recurring ticks are " \
                                "enqueued at the default priority (docs/flow-control.md)"
    end

    # `unique:` checked and normalised to a frozen, shareable
    # {by: :arguments | Proc | String, while: Symbol, for_ms: Integer | nil}
    # (docs/unique.md). A `by:` Proc runs in the producer, in whichever
    # Ractor enqueues, so it is made shareable here, at class definition.
    def self.unique_option(unique)
      return nil if unique.nil? || unique == false

      unique = {} if unique == true
      unless unique.is_a?(Hash)
        raise ConfigurationError,
              "task option unique must be a Hash like {by: :arguments, while: :queued} (got #{unique.inspect})"
      end
      unknown = unique.keys - UNIQUE_KEYS
      raise ConfigurationError, "unknown unique option(s) #{unknown.inspect}; known: #{UNIQUE_KEYS.inspect}" unless unknown.empty?

      by = unique.fetch(:by, :arguments)
      by = case by
           when :arguments then by
           when String then own(by)
           when Proc then Task.shareable_block(:"unique by:", by)
           else
             raise ConfigurationError, "unique by: must be :arguments, a String constant or a Proc taking the job's " \
                                       "arguments (got #{by.inspect})"
           end
      mode = unique.fetch(:while, :queued)
      unless UNIQUE_MODES.include?(mode)
        raise ConfigurationError, "unique while: must be one of #{UNIQUE_MODES.inspect} (got #{mode.inspect})"
      end

      limit = unique[:for]
      # Bounded so the lock's PX always fits Redis' integer: an enqueue that
      # Redis refused half-way would leave its job id registered without a
      # job.
      if unique.key?(:for) && !(limit.is_a?(Numeric) && limit.positive? && limit.finite? && limit <= UNIQUE_MAX_FOR)
        raise ConfigurationError, "unique for: must be a positive number of seconds, at most #{UNIQUE_MAX_FOR} " \
                                  "(a year; got #{limit.inspect})"
      end

      Ractor.make_shareable({by: by, while: mode, for_ms: limit && [(limit * 1000).round, 1].max})
    end

    # `concurrency:` checked and normalised to a frozen, shareable
    # {limit: Integer, key: Proc | nil, group: String | nil}
    # (docs/flow-control.md). A `key:` Proc runs in the producer, at
    # enqueue, on the job's arguments (like unique `by:`), so it is made
    # shareable here, at class definition.
    def self.concurrency_option(concurrency)
      return nil if concurrency.nil? || concurrency == false

      unless concurrency.is_a?(Hash)
        raise ConfigurationError, "task option concurrency must be a Hash like {limit: 2, key: ->(tenant_id, *) { tenant_id }} " \
                                  "(got #{concurrency.inspect})"
      end
      unknown = concurrency.keys - CONCURRENCY_KEYS
      unless unknown.empty?
        raise ConfigurationError, "unknown concurrency option(s) #{unknown.inspect}; known: #{CONCURRENCY_KEYS.inspect}"
      end

      limit = concurrency[:limit]
      unless limit.is_a?(Integer) && limit.between?(1, CONCURRENCY_MAX)
        raise ConfigurationError, "concurrency limit: must be an Integer from 1 to #{CONCURRENCY_MAX} (got #{limit.inspect})"
      end

      key = concurrency[:key]
      unless key.nil? || key.is_a?(Proc)
        raise ConfigurationError, "concurrency key: must be a Proc taking the job's arguments (got #{key.inspect})"
      end

      group = concurrency[:group]
      unless group.nil? || (group.is_a?(String) && group.match?(CONCURRENCY_GROUP))
        raise ConfigurationError, "concurrency group: must be a String of letters, digits, _ : . - (at most 100; " \
                                  "got #{group.inspect})"
      end

      Ractor.make_shareable({limit: limit, key: key && Task.shareable_block(:"concurrency key:", key),
                             group: group && own(group)})
    end

    # `rate:` checked and normalised to a frozen, shareable {limit:
    # Integer, window_ms: Integer (per + slack), slack_ms:, key: Proc | nil, group:
    # String | nil} (decision 42). The slack (default a twentieth of `per`,
    # 0.05 s to 1 s) widens the window the claim counts in, so starts stay
    # within the limit while a claimed job waits in a prefetch window.
    def self.rate_option(rate)
      return nil if rate.nil? || rate == false

      unless rate.is_a?(Hash)
        raise ConfigurationError, "task option rate must be a Hash like {limit: 100, per: 60, key: ->(account_id, *) " \
                                  "{ account_id }} (got #{rate.inspect})"
      end
      unknown = rate.keys - RATE_KEYS
      raise ConfigurationError, "unknown rate option(s) #{unknown.inspect}; known: #{RATE_KEYS.inspect}" unless unknown.empty?

      limit = rate[:limit]
      unless limit.is_a?(Integer) && limit.between?(1, RATE_MAX)
        raise ConfigurationError, "rate limit: must be an Integer from 1 to #{RATE_MAX} (got #{limit.inspect})"
      end

      per = rate[:per]
      unless per.is_a?(Numeric) && per.real? && RATE_PER.cover?(per)
        raise ConfigurationError, "rate per: must be a number of seconds from 1 to 86400 (got #{per.inspect})"
      end

      per_ms = (per * 1000).round
      slack = rate.fetch(:slack, nil)
      # At least 50 ms: a job waits some milliseconds between its claim and
      # its start, and one that waits past the slack is handed back.
      unless slack.nil? || (slack.is_a?(Numeric) && slack.real? && slack >= 0.05 && slack <= per)
        raise ConfigurationError, "rate slack: must be a number of seconds from 0.05 to per (got #{slack.inspect})"
      end

      slack_ms = slack ? (slack * 1000).round : (per_ms / 20).clamp(50, 1000)
      key = rate[:key]
      unless key.nil? || key.is_a?(Proc)
        raise ConfigurationError,
              "rate key: must be a Proc taking the job's arguments (got #{key.inspect})"
      end

      group = rate[:group]
      unless group.nil? || (group.is_a?(String) && group.match?(CONCURRENCY_GROUP))
        raise ConfigurationError, "rate group: must be a String of letters, digits, _ : . - (at most 100; got #{group.inspect})"
      end

      Ractor.make_shareable({limit: limit, window_ms: per_ms + slack_ms, slack_ms: slack_ms,
                             key: key && Task.shareable_block(:"rate key:", key),
                             group: group && own(group)})
    end

    def self.backend_name(setting, value)
      return value.to_sym if (value.is_a?(Symbol) || value.is_a?(String)) && !value.empty?

      raise ConfigurationError, "invalid #{setting} #{value.inspect}: expected a backend name (Symbol), " \
                                "e.g. :redis or :solid_engine"
    end

    # One backend spec, checked and copied: {adapter:, url:, ...} frozen.
    def self.backend_spec(name, spec)
      where = "backends[#{name.inspect}]"
      unless spec.is_a?(Hash)
        raise ConfigurationError, "invalid #{where}: expected a Hash like {adapter: :solid_engine, url: \"unix:///path\"}"
      end

      adapter = spec[:adapter]
      adapter = ADAPTER_ALIASES.fetch(adapter.to_sym, adapter.to_sym) if adapter.is_a?(Symbol) || adapter.is_a?(String)
      unless BACKEND_KEYS.key?(adapter)
        raise ConfigurationError, "invalid #{where}[:adapter] #{spec[:adapter].inspect}: expected :solid_redis or :solid_engine"
      end

      check_backend_keys(where, adapter, spec.keys)
      adapter == :solid_engine ? engine_spec(where, spec) : redis_spec(where, spec)
    end

    def self.check_backend_keys(where, adapter, keys)
      known = BACKEND_KEYS.fetch(adapter)
      unknown = keys - known
      return if unknown.empty?

      hints = unknown.filter_map do |key|
        guess = key.respond_to?(:to_sym) && spell_check(key.to_s, known.map(&:to_s))
        "#{key.inspect} (did you mean :#{guess}?)" if guess
      end
      raise ConfigurationError, "unknown key(s) #{unknown.map(&:inspect).join(", ")} in #{where}; a #{adapter} backend " \
                                "takes #{known.map(&:inspect).join(", ")}#{"; #{hints.join(", ")}" unless hints.empty?}"
    end

    def self.spell_check(word, dictionary)
      return nil unless defined?(DidYouMean::SpellChecker)

      DidYouMean::SpellChecker.new(dictionary: dictionary).correct(word).first
    end

    def self.redis_spec(where, spec)
      out = {adapter: :solid_redis}
      out[:url] = checked_url(:redis, "#{where}[:url]", spec[:url]) unless spec[:url].nil?
      out.freeze
    end

    def self.engine_spec(where, spec)
      raise ConfigurationError, "#{where} (solid_engine) needs url: unix:///path or tcp://host:port" unless spec.key?(:url)

      url = spec[:url]
      unless url.is_a?(String) && url.match?(%r{\A(unix|tcp)://}i)
        raise ConfigurationError, "invalid #{where}[:url] #{url.inspect}: expected unix:///path or tcp://host:port"
      end

      out = {adapter: :solid_engine, url: checked_url(:engine, "#{where}[:url]", url)}
      if spec.key?(:password)
        password = spec[:password]
        unless password.nil? || (password.is_a?(String) && !password.empty?)
          raise ConfigurationError, "invalid #{where}[:password]: expected a non-empty String or nil"
        end

        out[:password] = own(password) if password
      end
      if spec.key?(:lease)
        lease = spec[:lease]
        # 0 is meaningful: the server's default lease, never extended.
        unless lease.is_a?(Numeric) && lease.real? && lease.finite? && lease >= 0
          raise ConfigurationError, "invalid #{where}[:lease] #{lease.inspect}: expected a number of seconds >= 0 " \
                                    "(0: the server's default lease, not extended)"
        end

        out[:lease] = lease
      end
      out[:channel_ids] = engine_channel_ids(where, spec[:channel_ids]) if spec.key?(:channel_ids)
      out.freeze
    end

    def self.engine_channel_ids(where, ids)
      unless ids.is_a?(Hash)
        raise ConfigurationError, "invalid #{where}[:channel_ids] #{ids.inspect}: expected a Hash of channel name => id"
      end

      ids.to_h do |channel, id|
        valid_name = (channel.is_a?(String) || channel.is_a?(Symbol)) && channel.to_s.match?(CHANNEL_NAME)
        raise ConfigurationError, "invalid channel name #{channel.inspect} in #{where}[:channel_ids]" unless valid_name

        unless id.is_a?(Integer) && ENGINE_CHANNEL_IDS.cover?(id)
          raise ConfigurationError, "invalid #{where}[:channel_ids][#{channel.inspect}] #{id.inspect}: " \
                                    "expected an Integer from 0 to #{ENGINE_CHANNEL_IDS.end}"
        end

        [own(channel), id]
      end.freeze
    end

    def validate!
      if recovery_delay <= heartbeat_interval
        raise ConfigurationError,
              "recovery_delay (#{recovery_delay}) must be longer than heartbeat_interval (#{heartbeat_interval})"
      end

      backend_specs
      # Schedules whose task class is loaded already are checked against
      # the routing now; the others when a node starts.
      Recurring.check_supported!(recurring.values, self)
      self
    end

    # {name => spec} of every backend this configuration routes to: the
    # named specs, :redis (redis_url) unless named, and :solid_engine from
    # `url`. Checks that `backend` and every channel_backends entry name one
    # of them, and that `url` is used; ConfigurationError names the setting.
    def backend_specs
      specs = backends.dup
      specs[:redis] ||= {adapter: :solid_redis, url: redis_url}.freeze
      engine_from_url(specs)
      known = specs.keys.map(&:inspect).join(", ")
      unless specs.key?(backend)
        raise ConfigurationError, "invalid backend #{backend.inspect}: no such backend (known: #{known}; " \
                                  "name others in config.backends)"
      end

      channel_backends.each do |channel, name|
        next if specs.key?(name)

        raise ConfigurationError, "invalid channel_backends[#{channel.inspect}] #{name.inspect}: no such backend " \
                                  "(known: #{known}; name others in config.backends)"
      end
      specs.freeze
    end

    private

    # The process's configuration already (a setter on SolidJobs.config
    # itself, not on a configure draft): log settings take effect at once.
    def installed? = !frozen? && SolidJobs.config.equal?(self)

    # config.url is the shortcut for `backend = :solid_engine`: refused when
    # nothing would use it, so a URL set for nothing is not silently ignored.
    def engine_from_url(specs)
      named = specs[:solid_engine]
      if url.nil?
        return if named || backend != :solid_engine

        raise ConfigurationError, "backend = :solid_engine needs config.url (unix:///path or tcp://host:port) " \
                                  "or a :solid_engine entry in config.backends"
      end
      unless backend == :solid_engine
        raise ConfigurationError, "config.url #{url.inspect} is used only with config.backend = :solid_engine " \
                                  "(backend is #{backend.inspect}); to route some channels there, name it in config.backends"
      end
      if named && named[:url] != url
        raise ConfigurationError, "config.url #{url.inspect} differs from backends[:solid_engine][:url] " \
                                  "#{named[:url].inspect}, which is the one used; set only one of them"
      end

      specs[:solid_engine] ||= {adapter: :solid_engine, url: url}.freeze
    end

    # One of `choices`, given as a Symbol or a String; anything else (an
    # Integer from a config file, an object of the app's) is a
    # ConfigurationError, not a NoMethodError from converting it.
    def choice!(name, value, choices)
      given = case value
              when Symbol then value.name
              when String then String.new(value)
              end
      choice = given && choices.find { |c| c.name == given }
      choice or invalid!(name, value, "one of #{choices.join(", ")}")
    end

    def positive_number!(name, value, allow_zero: false)
      ok = value.is_a?(Numeric) && value.finite? && (allow_zero ? value >= 0 : value.positive?)
      invalid!(name, value, allow_zero ? "a number of seconds >= 0" : "a positive number of seconds") unless ok
    end

    def invalid!(name, value, expected)
      raise ConfigurationError, "invalid #{name} #{value.inspect}: expected #{expected}"
    end
  end
end
