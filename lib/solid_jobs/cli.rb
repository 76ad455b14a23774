# frozen_string_literal: true

require "optparse"

module SolidJobs
  # `solid-jobs`: parses flags into the configuration and runs a Conductor.
  # Bad flags exit 64 (EX_USAGE) with a message; no worker starts.
  class CLI
    USAGE_ERROR = 64

    def initialize(argv, out: $stdout, err: $stderr)
      @argv = argv.dup
      @out = out
      @err = err
    end

    def run
      return run_web if @argv.first == "web"
      return run_archive if @argv.first == "archive"

      options = parse
      return 0 if options == :exit

      load_app(options[:require])
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

      full = File.expand_path(path)
      candidates = [full, "#{full}.rb", File.join(full, "config", "environment.rb")]
      file = candidates.find { |f| File.file?(f) } or raise UsageError, "--require #{path}: no such file"
      require file
    end

    private

    # `solid-jobs web ...`: the dashboard server (loaded only when asked
    # for, so a worker never loads it).
    def run_web
      require "solid_jobs/web"
      require "solid_jobs/web/command"
      Web::Command.new(@argv.drop(1), out: @out, err: @err).run
    end

    # `solid-jobs archive ...`: bulk re-enqueue from the archive.
    def run_archive
      require "solid_jobs/archive_command"
      ArchiveCommand.new(@argv.drop(1), out: @out, err: @err).run
    end

    # Tasks may still be running (timeout or second signal): their claims
    # were requeued, so leave without waiting for them.
    def exit_now
      $stdout.flush
      $stderr.flush
      Kernel.exit!(0)
    end

    def parse
      options = {channels: []}
      parser = OptionParser.new do |o|
        o.banner = "Usage: solid-jobs [options]         run a worker node\n" \
                   "       solid-jobs web [options]     serve the dashboard (solid-jobs web --help)\n" \
                   "       solid-jobs archive reenqueue (--task NAME | --error CLASS | --all) [options]\n" \
                   "                                    put archived jobs back (solid-jobs archive --help)"
        o.separator ""
        o.on("-r", "--require PATH", "File to require before starting (e.g. ./config/environment)") { |v| options[:require] = v }
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

      options
    end

    def load_app(path) = self.class.load_app(path)

    def apply(options)
      SolidJobs.configure do |c|
        c.redis_url = options[:redis_url] if options[:redis_url]
        c.concurrency = options[:concurrency] if options[:concurrency]
        c.thread_concurrency = options[:thread_concurrency] if options.key?(:thread_concurrency)
        c.channels = options[:channels] unless options[:channels].empty?
        c.channel_order = options[:channel_order] if options[:channel_order]
        c.execution_mode = options[:execution_mode] if options[:execution_mode]
        c.shutdown_timeout = options[:shutdown_timeout] if options[:shutdown_timeout]
      end
    end
  end
end
