# frozen_string_literal: true

require_relative "test_helper"
require "stringio"
require "solid_jobs/cli"

# The contract SolidJobs::Subcommand gives every `solid-jobs NAME`
# subcommand, checked on each of them in-process through CLI (the same
# dispatch exe/solid-jobs runs): --help prints the usage with the app's
# options and exits 0 before anything loads; usage errors exit 64 on
# stderr with a pointer to the command's --help, stdout untouched; a
# runtime error the command declares exits with its code in one line.
class SubcommandTest < SolidJobsTest
  # Each subcommand, and the arguments that make its options parse.
  COMMANDS = {
    "web" => [],
    "health" => [],
    "recurring" => [],
    "archive" => %w[reenqueue --all],
    "channel" => %w[list]
  }.freeze
  APP_OPTIONS = ["--require PATH", "--config PATH", "--environment NAME", "--redis-url URL", "--namespace NS"].freeze

  def cli(*argv)
    out = StringIO.new
    err = StringIO.new
    code = SolidJobs::CLI.new(argv, out: out, err: err).run
    [code, out.string, err.string]
  end

  def assert_usage_error(name, argv, pattern)
    code, out, err = cli(name, *argv)
    label = "#{name} #{argv.join(" ")}"
    assert_equal 64, code, "#{label}: #{err}"
    assert_empty out, label
    assert_equal 2, err.lines.size, "#{label}: #{err}"
    assert_match(/\Asolid-jobs #{name}: #{pattern}/, err.lines.first, label)
    assert_equal "Run `solid-jobs #{name} --help` for usage.\n", err.lines.last, label
  end

  def test_help_prints_the_usage_with_the_app_options_and_exits_zero
    COMMANDS.each do |name, argv|
      # --help wins wherever it stands, even before a flag that does not parse.
      [[*argv, "--help"], [*argv, "-h", "--bogus"]].each do |args|
        code, out, err = cli(name, *args)
        assert_equal 0, code, "#{name} #{args.join(" ")}: #{err}"
        assert_empty err
        assert_match(/\AUsage: solid-jobs #{name}\b/, out)
        APP_OPTIONS.each { |option| assert_includes out, option, "#{name} --help" }
        assert_includes out, "-h, --help"
      end
    end
  end

  def test_usage_errors_exit_64_with_a_pointer_to_help
    missing = File.join(@ledger_dir, "no_such.yml")
    COMMANDS.each do |name, argv|
      assert_usage_error(name, [*argv, "--bogus"], "invalid option: --bogus")
      assert_usage_error(name, [*argv, "extra"], "unexpected argument\\(s\\): extra")
      assert_usage_error(name, [*argv, "--require", "./no/such/file"], "--require ./no/such/file: no such file")
      # The file is found before the app loads: a missing -C fails first.
      assert_usage_error(name, [*argv, "-C", missing, "--require", "./no/such/file"], ".*#{Regexp.escape(missing)}")
      assert_usage_error(name, [*argv, "-e", ""], "--environment needs a name")
    end
  end

  def test_each_command_validates_its_own_options
    assert_usage_error("web", %w[--port 70000], "invalid port 70000")
    assert_usage_error("health", %w[--node a --local], "--node and --local both name the nodes to check")
    assert_usage_error("health", %w[--timeout 0], "invalid --timeout 0.0")
    assert_usage_error("archive", %w[reenqueue], "say which jobs")
    assert_usage_error("archive", %w[reenqueue --all --task X], "--all re-enqueues every job")
    assert_usage_error("archive", %w[bogus], "expected a subcommand: reenqueue")
    assert_usage_error("channel", %w[bogus], "expected a subcommand: pause, resume, list")
    assert_usage_error("channel", %w[pause], "pause needs a channel name")
    assert_usage_error("channel", %w[resume --by x], "resume needs a channel name")
    assert_usage_error("channel", %w[resume mailers --by x], "--by goes with pause")
    assert_usage_error("channel", %w[pause mailers --json], "--json goes with list")
    assert_usage_error("channel", %w[pause bad:name], "invalid channel name")
  end

  # FAILURES: a Redis that does not answer is a runtime failure (exit 1,
  # one line, named by the command), not a usage error.
  def test_declared_failures_exit_with_their_code_in_one_line
    closed = "redis://127.0.0.1:#{closed_port}"
    {
      "recurring" => [[], /\Asolid-jobs recurring: .+\n\z/],
      "archive" => [%w[reenqueue --all], /\Asolid-jobs archive: SolidJobs::ConnectionError: .+\n\z/],
      "channel" => [%w[pause mailers], /\Asolid-jobs channel: SolidJobs::ConnectionError: .+\n\z/]
    }.each do |name, (argv, pattern)|
      code, out, err = cli(name, *argv, "--redis-url", closed)
      assert_equal 1, code, "#{name}: #{err}"
      assert_empty out
      assert_match pattern, err
    end
  ensure
    SolidJobs.configure { |c| c.redis_url = REDIS.url }
  end

  def closed_port
    server = TCPServer.new("127.0.0.1", 0)
    server.addr[1]
  ensure
    server&.close
  end

  # A bug in the app's boot is not the user's usage error: an ArgumentError
  # raised while the app loads propagates with the app's line in its
  # backtrace, not exit 64 with "Run --help" (a health probe exiting 64
  # would send the operator to the command line instead of the app).
  def test_an_argument_error_in_the_apps_boot_propagates
    COMMANDS.each do |name, argv|
      app = File.join(@ledger_dir, "bad_app_#{name}.rb")
      File.write(app, "TIMEOUT_#{name.upcase} = Integer(\"5s\") # a malformed setting parsed at boot\n")
      error = assert_raises(ArgumentError, name) { cli(name, *argv, "--require", app) }
      assert(error.backtrace.any? { |line| line.start_with?("#{app}:1") }, "#{name}: #{error.backtrace.first(3)}")
    end
  end
end
