# frozen_string_literal: true

require_relative "common"
require_relative "environment"
require_relative "lab"
require_relative "results_header"
require_relative "results_files"

module Bench
  # What every harness shares, for a subclass with `self.settings(env)` and
  # `#run` (an exit status):
  #
  #   exit Bench::LatencyBenchmark.main(ENV) if $PROGRAM_NAME == __FILE__
  #
  # A Failure (a case that could not be measured, a bad setting) is one line
  # on stderr and exit status 1, not a backtrace.
  class Harness
    def self.main(env)
      new(settings(env)).run
    rescue Failure => e
      warn "#{failure_label} failed: #{e.message}"
      1
    rescue Interrupt
      # Children and temporary directories are gone by now (ensure in run).
      warn "interrupted"
      130
    end

    # The word before "failed:" on stderr.
    def self.failure_label = "benchmark"

    def self.smoke?(env, name = "BENCH_SMOKE") = env[name] == "1"

    # Where results go: `name` from the environment, else `default`, except
    # that a smoke run writes nothing unless told where (it must not
    # overwrite the real results).
    def self.output_setting(env, name, default, smoke:)
      env[name] || (smoke ? nil : default)
    end

    # "1,2,4,8" -> [1, 2, 4, 8] (duplicates dropped, sorted when `sort`); a
    # bad value fails the run before anything starts.
    def self.integer_list(env, name, default, sort: false)
      return default unless env[name]

      values = env[name].split(",").map { |v| Integer(v.strip, exception: false) }
      unless !values.empty? && values.all? { |v| v&.positive? }
        raise Failure, "#{name} must be a comma-separated list of positive integers, e.g. 1,2,4,8 (got #{env[name].inspect})"
      end

      sort ? values.uniq.sort : values.uniq
    end

    def initialize(settings)
      @settings = settings
    end

    private

    # The start of #run (whose `ensure` calls `@lab&.close`): unbuffered
    # progress, the load average before anything runs (other work on a
    # 2-core host skews every number), then the Lab.
    def open_lab(tmpdir: nil)
      $stdout.sync = true
      @load_at_start = Environment.load_average
      @lab = Lab.new(tmpdir: tmpdir)
    end

    # ResultsHeader.line for the lab's redis-server and the load at start.
    def results_header(**options)
      ResultsHeader.line(redis_version: ResultsHeader.redis_version(@lab.redis), load_at_start: @load_at_start, **options)
    end

    # The report's lines, then its errors if any, as one text.
    def with_errors(lines, report)
      errors = report.error_lines
      lines += ["", "Errors:", *errors] unless errors.empty?
      lines.join("\n")
    end

    # `<dir>/<name>.md` and `.csv` (ResultsFiles.write), and says so.
    def write_results(dir, name, markdown, report)
      paths = ResultsFiles.write(dir, name, markdown: markdown, csv_header: report.csv_header, csv_rows: report.csv_rows)
      puts "", "Wrote #{paths.join(" and ")}"
    end

    # One results file (ResultsFiles.write_file), and says so.
    def write_result_file(path, content)
      ResultsFiles.write_file(path, content)
      puts "", "Wrote #{path}"
    end
  end
end
