# frozen_string_literal: true

require "optparse"
require "solid_jobs/app_options"
require_relative "cli"
require_relative "config_file"

module SolidJobs
  # `solid-jobs archive reenqueue --task NAME | --error CLASS | --all`: puts
  # archived jobs back on their channels in bulk (SolidJobs::Archive), for
  # example every job archived as an unknown task once the workers run the
  # code that defines it. Prints what it did; entries that never decoded
  # stay quarantined and are counted. Bad flags exit 64; an unreachable or
  # failing Redis exits 1 with the error.
  class ArchiveCommand
    USAGE_ERROR = 64
    FAILED = 1
    UsageError = CLI::UsageError

    def initialize(argv, out: $stdout, err: $stderr)
      @argv = argv.dup
      @out = out
      @err = err
    end

    def run
      action = @argv.shift
      return help if %w[-h --help].include?(action)
      raise UsageError, "expected a subcommand: reenqueue" unless action == "reenqueue"

      options = parse
      return 0 if options == :exit

      AppOptions.apply(options)
      result = options[:all] ? Archive.reenqueue_all : Archive.reenqueue_where(task: options[:task], error_class: options[:error])
      @out.puts("solid-jobs archive reenqueue (#{describe(options)}): #{result}")
      0
    rescue OptionParser::ParseError, ConfigurationError, UsageError => e
      @err.puts("solid-jobs archive: #{e.message}")
      @err.puts("Run `solid-jobs archive --help` for usage.")
      USAGE_ERROR
    rescue Error => e
      @err.puts("solid-jobs archive: #{e.class}: #{e.message}")
      FAILED
    end

    private

    def parser(options = {})
      OptionParser.new do |o|
        o.banner = "Usage: solid-jobs archive reenqueue (--task NAME | --error CLASS | --all) [options]\n\n" \
                   "Puts archived jobs back on their channels with a fresh failure count.\n" \
                   "--task and --error together re-enqueue the jobs matching both."
        o.separator ""
        o.on("--task NAME", "Jobs of this task (e.g. Billing::Invoice)") { |v| options[:task] = v }
        o.on("--error CLASS", "Jobs whose last failure was this error class (e.g. SolidJobs::UnknownTaskError)") do |v|
          options[:error] = v
        end
        o.on("--all", "Every archived job that decodes") { options[:all] = true }
        AppOptions.define(o, options)
        o.on("-h", "--help", "Show this help") { options[:help] = true }
      end
    end

    def help
      @out.puts(parser)
      0
    end

    def parse
      options = {}
      rest = parser(options).parse(@argv)
      return help && :exit if options[:help]
      raise UsageError, "unexpected argument(s): #{rest.join(" ")}" unless rest.empty?

      filtered = options[:task] || options[:error]
      raise UsageError, "--all re-enqueues every job: do not combine it with --task or --error" if options[:all] && filtered
      raise UsageError, "say which jobs: --task NAME, --error CLASS or --all" unless options[:all] || filtered

      options
    end

    def describe(options)
      return "all" if options[:all]

      [("task #{options[:task]}" if options[:task]), ("error #{options[:error]}" if options[:error])].compact.join(", ")
    end
  end
end
