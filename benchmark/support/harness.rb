# frozen_string_literal: true

$LOAD_PATH.unshift(File.expand_path("../../lib", __dir__))
require "csv"
require "etc"
require "fileutils"
require "redis"
require "tmpdir"
require "solid_jobs"
require_relative "../../test/support/processes"
require_relative "../../test/support/other_ruby"

# What every harness under benchmark/ shares: settings from the environment
# (one prefix, BENCH_), facts about the host for the results header, result
# files, and the Harness base class. Processes come from
# test/support/processes, the helpers the test suite uses.
module Bench
  ROOT = File.expand_path("../..", __dir__)
  RESULTS_DIR = File.join(ROOT, "benchmark/results")

  # A case could not be measured, or a setting is bad (as opposed to a slow
  # result, which is a MISS line).
  class Failure < StandardError; end

  # Monotonic, so wall-clock adjustments cannot distort a measurement.
  def self.now = Process.clock_gettime(Process::CLOCK_MONOTONIC)

  # The BENCH_* variables, read once at start: a bad value fails the run
  # before anything starts, naming the variable and what it accepts,
  # instead of being silently replaced by the default.
  class Settings
    def initialize(env)
      @env = env
    end

    # BENCH_SMOKE=1: tiny sizes for the smoke tests; results are written
    # only where BENCH_OUTPUT_DIR says, never over the committed ones.
    def smoke? = @env["BENCH_SMOKE"] == "1"
    def keep? = @env["BENCH_KEEP"] == "1"
    def output_dir = @env["BENCH_OUTPUT_DIR"] || (smoke? ? nil : RESULTS_DIR)
    # BENCH_NOTE: a line for a results file (what else was running on the
    # host), for the harnesses that print one; nil when unset or blank.
    def note = @env["BENCH_NOTE"].to_s.strip.then { |text| text.empty? ? nil : text }

    def integer(name, default) = positive(name, default, "integer") { |text| Integer(text, exception: false) }
    def number(name, default) = positive(name, default, "number") { |text| Float(text, exception: false) }

    # "1,2,8" -> [1, 2, 8]
    def integers(name, default)
      return default unless @env[name]

      values = items(name).map { |item| Integer(item, exception: false) }
      unless values.all? { |v| v&.positive? }
        raise Failure, "#{name} must be a comma-separated list of positive integers (got #{@env[name].inspect})"
      end

      values.uniq
    end

    # A list of integers for each of `kinds`: one list for all ("1,2,8"),
    # or lists by kind, separated by ";" ("process-cpu=1,2;process-io-50ms=8,32");
    # a group without a kind ("1,2;noop=8") is the list of the kinds not
    # named, which otherwise keep `default`. A named kind must be one of
    # `kinds`, so a list cannot silently go unused.
    def per_kind_integers(name, kinds, default)
      text = @env[name]
      return kinds.to_h { |kind| [kind, integers(name, default)] } unless text&.include?("=")

      rest = default
      named = text.split(";").map(&:strip).reject(&:empty?).each_with_object({}) do |group, lists|
        kind, list = group.include?("=") ? group.split("=", 2).map(&:strip) : [nil, group]
        values = Settings.new(name => list).integers(name, nil)
        next rest = values unless kind
        raise Failure, "#{name}: #{kind} is not a scenario of this run (#{kinds.join(", ")})" unless kinds.include?(kind)

        lists[kind] = values
      end
      kinds.to_h { |kind| [kind, named.fetch(kind, rest)] }
    rescue Failure => e
      raise Failure, "#{e.message}; #{name} takes a comma list, or scenario=list groups separated by \";\" " \
                     "(got #{text.inspect})"
    end

    # Names from `allowed`, in the order given.
    def choices(name, allowed, default)
      return default unless @env[name]

      values = items(name)
      unknown = values.reject { |value| allowed.include?(value) }
      raise Failure, "#{name}: unknown #{unknown.join(", ")} (choose from #{allowed.join(", ")})" unless unknown.empty?

      values.uniq
    end

    # One count for every kind ("5000"), or some kinds set by name
    # ("noop=50000,process-cpu=2000"); `defaults` names the kinds.
    def per_kind(name, defaults)
      return defaults unless @env[name]
      return defaults.transform_values { integer(name, nil) } unless @env[name].include?("=")

      defaults.merge(items(name).to_h do |item|
        kind, count = item.split("=", 2).map(&:strip)
        value = Integer(count.to_s, exception: false)
        raise Failure, "#{name}: unknown #{kind} (choose from #{defaults.keys.join(", ")})" unless defaults.key?(kind)
        raise Failure, "#{name}: #{kind} must be a positive integer (got #{count.inspect})" unless value&.positive?

        [kind, value]
      end)
    end

    private

    def positive(name, default, kind)
      return default unless @env[name]

      value = yield(@env[name])
      raise Failure, "#{name} must be a positive #{kind} (got #{@env[name].inspect})" unless value&.positive?

      value
    end

    def items(name)
      values = @env[name].split(",").map(&:strip).reject(&:empty?)
      raise Failure, "#{name} is empty" if values.empty?

      values
    end
  end

  # Facts about the host for the header of a results file: numbers from a
  # shared 2-core VM mean little without them.
  module Host
    # The code a benchmark measures; the benchmark's own files are not in it.
    MEASURED_PATHS = %w[crates ext lib exe Cargo.toml Cargo.lock].freeze

    module_function

    def cpu_model
      line = File.foreach("/proc/cpuinfo").find { |l| l.start_with?("model name") }
      line ? line.split(":", 2).last.strip : "unknown"
    rescue SystemCallError
      "unknown"
    end

    def nproc = Etc.nprocessors
    def ruby = "#{RUBY_VERSION}p#{RUBY_PATCHLEVEL}"

    # Other work on a small host skews every number; record how busy it was.
    def load_average
      File.read("/proc/loadavg").split.first(3).join(" ")
    rescue SystemCallError
      "unknown"
    end

    # The short HEAD commit, marked +modified when the measured code differs
    # from it (other work in progress in this checkout), so the commit alone
    # would not identify what ran.
    def commit
      commit = git("rev-parse", "--short", "HEAD").strip
      return "unknown" if commit.empty?

      modified = !git("status", "--porcelain", "--untracked-files=no", "--", *MEASURED_PATHS).strip.empty?
      modified ? "#{commit}+modified" : commit
    end

    def git(*args) = IO.popen(["git", "-C", ROOT, *args], err: File::NULL, &:read)

    # "Redis server v=7.0.15 sha=..." -> "7.0.15"
    def redis_version = IO.popen(["redis-server", "--version"], err: File::NULL, &:read)[/v=(\S+)/, 1] || "unknown"

    # The environment line at the top of a results file and of its console
    # output. `load_at_end`: the load average now as well.
    def header(load_at_start:, load_at_end: false)
      load = "load average at start: #{load_at_start}"
      load += ", at end: #{load_average}" if load_at_end
      sidekiq = defined?(Sidekiq::VERSION) ? Sidekiq::VERSION : "not loaded"
      # Workers of "name@X.Y" clients ran on another Ruby (OtherRuby).
      others = OtherRuby.used.map { |version, description| "Ruby for @#{version} clients: #{description}" }
      ["CPU: #{cpu_model}", "nproc: #{nproc}", "Ruby: #{ruby}", *others, "Redis: #{redis_version}", "commit: #{commit}",
       "Sidekiq: #{sidekiq}", "SolidJobs: #{SolidJobs::VERSION}", load].join(" | ")
    end
  end

  # --- formatting, shared by every report ------------------------------------

  module_function

  # A table padded to column width, so it reads as well in a terminal as
  # rendered.
  def table(header, rows)
    cells = [header, *rows].map { |row| row.map(&:to_s) }
    widths = header.each_index.map { |i| cells.map { |row| row[i].length }.max }
    line = ->(row) { "| #{row.each_with_index.map { |cell, i| cell.ljust(widths[i]) }.join(" | ")} |" }
    separator = "|#{widths.map { |w| "-" * (w + 2) }.join("|")}|"
    [line.(cells.first), separator, *cells.drop(1).map(&line)].join("\n")
  end

  # 123456.7 -> "123,457"
  def delimit(number) = number.round.to_s.reverse.scan(/\d{1,3}/).join(",").reverse

  def ms(value) = value ? format("%.3f", value) : "n/a"

  # A target line: "PASS  what = 2.10x (target >= 2.0x)", MISS when not met,
  # "n/a" when a case it needs was not measured (that is not a miss).
  def ratio_target(value, target, what)
    return "n/a   #{what} (needs both cases measured)" unless value

    format("%-5s %s = %.2fx (target >= %.1fx)", value >= target ? "PASS" : "MISS", what, value, target)
  end

  # a / b of two results that both measured (`ok?`, `jobs_per_second`).
  def ratio(a, b) = a&.ok? && b&.ok? ? a.jobs_per_second / b.jobs_per_second : nil

  def median(values)
    sorted = values.sort
    middle = sorted.size / 2
    sorted.size.odd? ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2.0
  end

  # Through a temporary file and a rename, so an interrupted run never
  # leaves half a results file behind.
  def write_file(path, content)
    FileUtils.mkdir_p(File.dirname(path))
    File.write("#{path}.tmp", content)
    File.rename("#{path}.tmp", path)
    path
  end

  def csv(header, rows) = CSV.generate { |out| [header, *rows].each { |row| out << row } }

  # Where a harness runs its cases: one ChildGroup for every process it
  # starts, a private redis-server (no persistence) with a client on it,
  # and a scratch directory, short because engine sockets live below it.
  Lab = Struct.new(:children, :redis_server, :redis, :dir, keyword_init: true) do
    def self.open
      children = ChildGroup.new
      lab = new(children: children, dir: Dir.mktmpdir("sjb"), redis_server: RedisServer.new(children: children))
      lab.start
    rescue Exception # rubocop:disable Lint/RescueException -- whatever stopped the start, nothing may be left running
      lab&.close
      raise
    end

    def start
      redis_server.start
      self.redis = Redis.new(url: redis_server.url)
      self
    end

    def url = redis_server.url

    # Safe after a failed start; `keep` leaves the logs for a post-mortem.
    def close(keep: false)
      redis&.close
      redis_server&.cleanup
      children.close
      keep ? warn("kept #{dir}") : FileUtils.rm_rf(dir)
    end
  end

  # The base of every harness: `exit Bench::Latency.main if $PROGRAM_NAME ==
  # __FILE__`. A subclass reads its settings in `initialize` (through
  # @settings) and implements `measure`, returning true when every case
  # was measured cleanly. A Failure (a bad setting, a case that could not
  # run) is one line on stderr and exit status 1, not a backtrace; missing a
  # performance target is a result (a MISS line), not an error.
  class Harness
    def self.main(env = ENV)
      new(Settings.new(env)).run ? 0 : 1
    rescue Failure, ProcessError => e
      warn "#{name.split("::").last.downcase} failed: #{e.message}"
      1
    rescue Interrupt
      # Children and temporary directories are gone by now (ensure in run).
      warn "interrupted"
      130
    end

    def initialize(settings)
      @settings = settings
      @smoke = settings.smoke?
    end

    def run
      $stdout.sync = true
      # Read before anything runs: the load the measurements were taken at.
      @load_at_start = Host.load_average
      @lab = Lab.open
      measure
    ensure
      @lab&.close(keep: @settings.keep?)
    end

    private

    def header(load_at_end: false) = Host.header(load_at_start: @load_at_start, load_at_end: load_at_end)
    def run_time = Time.now.utc.strftime("%Y-%m-%d %H:%M UTC")

    # "error text" of a case that could not be measured, with the end of
    # the worker's log, also shown on stderr.
    def failure_text(error, workers = nil)
      text = "#{error.class}: #{error.message}"
      text += "\nworker: #{workers.description}\nworker output (last lines):\n#{workers.log_tail}" if workers
      warn "  #{text.gsub("\n", "\n  ")}"
      text
    end

    # Prints `body`, and writes it to <output dir>/<name>.md under `title`,
    # the header and `intro`, with `csv` beside it when given. A smoke run
    # writes nothing unless BENCH_OUTPUT_DIR says where.
    def publish(name, title:, intro:, body:, csv: nil, header: self.header)
      puts "", header, "", body
      dir = @settings.output_dir or return
      paths = [Bench.write_file(File.join(dir, "#{name}.md"), "# #{title}\n\n#{header}\n\n#{intro}\n\n#{body}\n")]
      paths << Bench.write_file(File.join(dir, "#{name}.csv"), "# #{header}\n#{csv}") if csv
      puts "", "Wrote #{paths.join(" and ")}"
    end

    # The lines, then the errors of the cases that had any.
    def with_errors(lines, errors)
      (errors.empty? ? lines : lines + ["", "Errors:", *errors]).join("\n")
    end
  end
end
