# frozen_string_literal: true

require "optparse"
require_relative "app_options"
require_relative "cli"

module SolidJobs
  # The skeleton of the `solid-jobs NAME ...` commands that read an
  # application's configuration (recurring, health, archive, web), so they
  # parse, load the app and fail alike:
  #
  # - the app's options (-r, -C, -e, --redis-url, --namespace: AppOptions),
  #   applied in the worker's order before the command's body runs;
  # - -h/--help prints the usage and exits 0, before anything loads;
  # - usage errors (a bad flag, an extra argument, a configuration the app
  #   or file gets wrong) exit 64 with the message and a pointer to --help,
  #   on stderr;
  # - the runtime errors a subclass declares in FAILURES exit with their
  #   code and one line on stderr; any other error is a bug and propagates.
  #
  # A subclass names itself (COMMAND, the words in its messages) and its
  # usage (BANNER), and defines its own options (#define_options, with
  # #defaults and #validate) and its body (#call, returning the exit code).
  class Subcommand
    USAGE_ERROR = 64
    UsageError = CLI::UsageError
    # What the user got wrong, not the command. An ArgumentError is not
    # among them: each command checks its option values itself (#validate,
    # the parser's blocks) before any library call sees them, so one raised
    # while the app loads or the body runs is a bug, the app's or ours, and
    # propagates with its backtrace.
    USAGE_ERRORS = [OptionParser::ParseError, ConfigurationError, UsageError].freeze
    # { error class => exit code } for errors the body reports in one line.
    FAILURES = {}.freeze

    def initialize(argv, out: $stdout, err: $stderr)
      @argv = argv.dup
      @out = out
      @err = err
    end

    def run
      options = catch(:help) { parse } or return 0

      AppOptions.apply(options)
      call(options)
    rescue *USAGE_ERRORS => e
      @err.puts("#{self.class::COMMAND}: #{e.message}")
      @err.puts("Run `#{self.class::COMMAND} --help` for usage.")
      USAGE_ERROR
    rescue *self.class::FAILURES.keys => e
      @err.puts("#{self.class::COMMAND}: #{failure_message(e)}")
      self.class::FAILURES.find { |klass, _| e.is_a?(klass) }.last
    end

    private

    # The body, once the options are parsed and the app configured: the
    # exit code.
    def call(options) = raise(NotImplementedError, "#{self.class} must define #call")

    # The command's own options, added before the app's and --help.
    def define_options(parser, options); end

    # The options before the flags.
    def defaults = {}

    # Checks (and may normalize) the parsed options; raises UsageError.
    def validate(options); end

    def failure_message(error) = error.message

    def parse
      options = defaults
      rest = parser(options).parse(@argv)
      raise UsageError, "unexpected argument(s): #{rest.join(" ")}" unless rest.empty?

      validate(options)
      options
    end

    def parser(options = defaults)
      OptionParser.new do |o|
        o.banner = self.class::BANNER
        o.separator ""
        define_options(o, options)
        AppOptions.define(o, options)
        o.on("-h", "--help", "Show this help") { help(o) }
      end
    end

    # Prints the usage and leaves #parse: the command does nothing else.
    def help(parser)
      @out.puts(parser)
      throw :help
    end
  end
end
