# frozen_string_literal: true

require "optparse"
require "solid_jobs/engine_server"
require "solid_jobs/config_file"

module SolidJobs
  # `solid-jobs`: parses flags into the configuration and runs a Conductor.
  # Bad flags exit 64 (EX_USAGE) with a message; no worker starts.
  class CLI
    USAGE_ERROR = 64
    # EX_UNAVAILABLE: `solid-jobs engine` without a solid-engine-server binary.
    UNAVAILABLE = 69

    # The subcommands that read the app's configuration (SolidJobs::
    # Subcommand): each loaded only when named, so a worker never loads
    # them (nor the dashboard).
    SUBCOMMANDS = {
      "web" => ["solid_jobs/web/command", "Web::Command"], # the dashboard server
      "archive" => ["solid_jobs/archive_command", "ArchiveCommand"], # bulk re-enqueue from the archive
      "health" => ["solid_jobs/health_command", "HealthCommand"], # the probe (exit codes in HealthCommand)
      "recurring" => ["solid_jobs/recurring_command", "RecurringCommand"], # the schedules, their next and last runs
      "channel" => ["solid_jobs/channel_command", "ChannelCommand"] # pause, resume, list channels
    }.freeze

    def initialize(argv, out: $stdout, err: $stderr)
      @argv = argv.dup
      @out = out
      @err = err
    end

    def run
      case @argv.first
      when *SUBCOMMANDS.keys then return run_subcommand(*SUBCOMMANDS.fetch(@argv.first))
      when "engine" then return run_engine
      when "warm" then return run_warm
      end

      options = parse
      return 0 if options == :exit

      # Before the app loads, so what it logs while loading obeys the flags.
      log_flags(options)
      # Precedence: flags > the file > the app's SolidJobs.configure >
      # defaults. The file is found (a missing -C fails) before the app
      # loads, and applied after it, so its ERB sees what the app set up.
      config_file = ConfigFile.find(path: options[:config], environment: options[:environment], app: options[:require])
      load_app(options[:require])
      config_file&.apply
      Log.info("configuration file #{config_file.path} (environment #{config_file.environment})") if config_file
      apply(options)
      Conductor.new.run == :stopped ? 0 : exit_now
    rescue OptionParser::ParseError, ConfigurationError, UsageError => e
      @err.puts("solid-jobs: #{e.message}")
      @err.puts("Run `solid-jobs --help` for usage.")
      USAGE_ERROR
    end

    class UsageError < StandardError; end

    # Requires the application for `--require PATH` (a file, PATH.rb, or a
    # directory's config/environment.rb); shared by `solid-jobs web`.
    def self.load_app(path)
      return unless path

      require app_file(path)
      # An app that required "solid_jobs" itself (already loaded by this
      # command, so a no-op) rather than through Bundler.require still
      # gets the Railtie's task loading (Recurring.load_tasks).
      SolidJobs.integrate_frameworks
    end

    def self.app_file(path)
      full = File.expand_path(path)
      candidates = [full, "#{full}.rb", File.join(full, "config", "environment.rb")]
      candidates.find { |f| File.file?(f) } or raise UsageError, "--require #{path}: no such file"
    end

    # `-e NAME`: the app boots in the environment whose section the file
    # gives (as Sidekiq's -e does), so the two cannot disagree.
    def self.select_environment(name)
      return unless name

      raise UsageError, "--environment needs a name" if name.empty?

      ENV["RAILS_ENV"] = ENV["RACK_ENV"] = name
    end

    private

    def run_subcommand(feature, class_name)
      require feature
      SolidJobs.const_get(class_name).new(@argv.drop(1), out: @out, err: @err).run
    end

    # `solid-jobs engine ...`: becomes solid-engine-server (exec, so signals
    # and the exit status are the server's own) with the remaining
    # arguments. The binary is the one `gem install` built beside the
    # extension (or the platform gem shipped); in a checkout, cargo's.
    def run_engine
      binary = EngineServer.binary or begin
        @err.puts("solid-jobs engine: #{EngineServer.missing_message}")
        return UNAVAILABLE
      end
      Kernel.exec(binary, *@argv.drop(1))
    end

    # `solid-jobs warm ID [--require PATH]`: a warm-pool worker (see
    # SolidJobs::WarmWorker) loading the app's config/environment.rb.
    def run_warm
      require "solid_jobs/warm_worker"
      options = {}
      parser = OptionParser.new do |o|
        o.banner = "Usage: solid-jobs warm ID [options]   a warm-pool worker (ID: 0 to SOLID_JOBS_WARM_WORKERS - 1)"
        o.on("-r", "--require PATH", "The app to load (default ./config/environment.rb)") { |v| options[:require] = v }
        o.on("-h", "--help", "Show this help") do
          @out.puts(o)
          return 0
        end
      end
      rest = parser.parse(@argv.drop(1))
      id = rest.size == 1 ? Integer(rest.first, exception: false) : nil
      raise UsageError, "warm needs one worker ID, an Integer from 0 (got #{rest.join(" ").inspect})" unless id && id >= 0

      environment = options[:require] && self.class.app_file(options[:require])
      WarmWorker.new(id, environment: environment).run
    end

    # Tasks may still be running (timeout or second signal): their claims
    # were requeued, so leave without waiting for them.
    def exit_now
      # exit! skips at_exit, where a configured logger gets its last lines.
      Log.flush if Log.logger
      $stdout.flush
      $stderr.flush
      Kernel.exit!(0)
    end

    def parse
      options = {channels: []}
      parser = OptionParser.new do |o|
        o.banner = "Usage: solid-jobs [options]         run a worker node\n" \
                   "       solid-jobs web [options]     serve the dashboard (solid-jobs web --help)\n" \
                   "       solid-jobs engine [options]  run solid-engine-server, the SolidEngine job server " \
                   "(solid-jobs engine --help)\n" \
                   "       solid-jobs warm ID           run warm-pool worker ID from the app's root (solid-jobs warm --help)\n" \
                   "       solid-jobs archive reenqueue (--task NAME | --error CLASS | --all) [options]\n" \
                   "                                    put archived jobs back (solid-jobs archive --help)\n" \
                   "       solid-jobs health [--node ID | --local]\n" \
                   "                                    exit 0 when the backends answer and the nodes heartbeat " \
                   "(solid-jobs health --help)\n" \
                   "       solid-jobs recurring         list the recurring schedules: next run, last run, last job " \
                   "(solid-jobs recurring --help)\n" \
                   "       solid-jobs channel pause|resume NAME, channel list\n" \
                   "                                    pause or resume claiming from a channel (solid-jobs channel --help)"
        o.separator ""
        o.on("-r", "--require PATH", "File to require before starting (e.g. ./config/environment)") { |v| options[:require] = v }
        o.on("-C", "--config PATH", "Configuration file (default: config/solid_jobs.yml under the app, when present)") do |v|
          options[:config] = v
        end
        o.on("-e", "--environment NAME", "The file's section to use; also sets RAILS_ENV and RACK_ENV " \
                                         "(default $RAILS_ENV, $RACK_ENV, development)") do |v|
          options[:environment] = v
        end
        o.on("-c", "--concurrency N", Integer,
             "Workers in this process (default #{Configuration::DEFAULTS[:concurrency]})") do |v|
          options[:concurrency] = v
        end
        o.on("--thread-concurrency N", Integer,
             "Thread workers beside the Ractors, for Ractor-unsafe tasks (Active Job); default: 5 when needed") do |v|
          options[:thread_concurrency] = v
        end
        o.on("--channel NAME[,WEIGHT]", "Channel to work, with an optional weight; repeatable") { |v| options[:channels] << v }
        o.on("--channel-order ORDER", "weighted (default), priority or shuffle") { |v| options[:channel_order] = v }
        o.on("--redis-url URL", "Redis URL (default $SOLID_JOBS_REDIS_URL or #{Configuration::DEFAULTS[:redis_url]})") do |v|
          options[:redis_url] = v
        end
        o.on("--execution-mode MODE", "ractor (default) or thread") { |v| options[:execution_mode] = v }
        o.on("--shutdown-timeout SECONDS", Float, "Seconds running tasks get to finish on TERM") do |v|
          options[:shutdown_timeout] = v
        end
        o.on("--log-level LEVEL", "debug, info, warn, error or none (default $SOLID_JOBS_LOG_LEVEL or info)") do |v|
          options[:log_level] = choice("--log-level", v, Configuration::LOG_LEVELS)
        end
        o.on("--log-format FORMAT", "text, or json: one object per line (default $SOLID_JOBS_LOG_FORMAT or text)") do |v|
          options[:log_format] = choice("--log-format", v, Log::FORMATS)
        end
        o.on("--[no-]scheduler", "Run the recurring scheduler in this node (default: yes; any number of nodes may)") do |v|
          options[:scheduler] = v
        end
        o.on("--queue NAME", "Not supported: SolidJobs calls them channels") do
          raise UsageError, "--queue is not an option: SolidJobs works channels; use --channel NAME[,WEIGHT]"
        end
        o.on("-v", "--version", "Print the version") do
          @out.puts("solid-jobs #{VERSION}")
          return :exit
        end
        o.on("-h", "--help", "Show this help") do
          @out.puts(o)
          return :exit
        end
      end
      rest = parser.parse(@argv)
      raise UsageError, "unexpected argument(s): #{rest.join(" ")}" unless rest.empty?

      self.class.select_environment(options[:environment])
      options
    end

    def load_app(path) = self.class.load_app(path)

    def choice(flag, value, choices)
      choices.find { |c| c.to_s == value.downcase } or
        raise UsageError, "#{flag} #{value.inspect}: expected one of #{choices.join(", ")}"
    end

    def log_flags(options)
      Log.level = options[:log_level] if options[:log_level]
      Log.format = options[:log_format] if options[:log_format]
    end

    def apply(options)
      SolidJobs.configure do |c|
        c.redis_url = options[:redis_url] if options[:redis_url]
        c.concurrency = options[:concurrency] if options[:concurrency]
        c.thread_concurrency = options[:thread_concurrency] if options.key?(:thread_concurrency)
        c.channels = options[:channels] unless options[:channels].empty?
        c.channel_order = options[:channel_order] if options[:channel_order]
        c.execution_mode = options[:execution_mode] if options[:execution_mode]
        c.shutdown_timeout = options[:shutdown_timeout] if options[:shutdown_timeout]
        c.scheduler = options[:scheduler] if options.key?(:scheduler)
        # Flags win over the app's configure (and so over the environment).
        c.log_level = options[:log_level] if options[:log_level]
        c.log_format = options[:log_format] if options[:log_format]
      end
    end
  end
end
