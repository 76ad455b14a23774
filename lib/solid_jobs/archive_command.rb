# frozen_string_literal: true

require_relative "subcommand"
require_relative "config_file"

module SolidJobs
  # `solid-jobs archive reenqueue --task NAME | --error CLASS | --all`: puts
  # archived jobs back on their channels in bulk (SolidJobs::Archive), for
  # example every job archived as an unknown task once the workers run the
  # code that defines it. Prints what it did; entries that never decoded
  # stay quarantined and are counted. Bad flags exit 64; an unreachable or
  # failing Redis exits 1 with the error.
  class ArchiveCommand < Subcommand
    FAILED = 1
    COMMAND = "solid-jobs archive"
    BANNER = "Usage: solid-jobs archive reenqueue (--task NAME | --error CLASS | --all) [options]\n\n" \
             "Puts archived jobs back on their channels with a fresh failure count.\n" \
             "--task and --error together re-enqueue the jobs matching both."
    FAILURES = {Error => FAILED}.freeze

    private

    # The action comes first; `archive --help` is the action's usage.
    def parse
      action = @argv.shift
      help(parser) if %w[-h --help].include?(action)
      raise UsageError, "expected a subcommand: reenqueue" unless action == "reenqueue"

      super
    end

    def define_options(parser, options)
      parser.on("--task NAME", "Jobs of this task (e.g. Billing::Invoice)") { |v| options[:task] = v }
      parser.on("--error CLASS", "Jobs whose last failure was this error class (e.g. SolidJobs::UnknownTaskError)") do |v|
        options[:error] = v
      end
      parser.on("--all", "Every archived job that decodes") { options[:all] = true }
    end

    def validate(options)
      filtered = options[:task] || options[:error]
      raise UsageError, "--all re-enqueues every job: do not combine it with --task or --error" if options[:all] && filtered
      raise UsageError, "say which jobs: --task NAME, --error CLASS or --all" unless options[:all] || filtered
    end

    def call(options)
      result = options[:all] ? Archive.reenqueue_all : Archive.reenqueue_where(task: options[:task], error_class: options[:error])
      @out.puts("solid-jobs archive reenqueue (#{describe(options)}): #{result}")
      0
    end

    # Any other library error (Redis down, a failing script) names its class.
    def failure_message(error) = "#{error.class}: #{error.message}"

    def describe(options)
      return "all" if options[:all]

      [("task #{options[:task]}" if options[:task]), ("error #{options[:error]}" if options[:error])].compact.join(", ")
    end
  end
end
