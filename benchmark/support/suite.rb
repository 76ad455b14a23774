# frozen_string_literal: true

require "tmpdir"
require "fileutils"
require_relative "common"
require_relative "env_lists"
require_relative "child_group"
require_relative "cpu_calibration"
require_relative "scenarios"
require_relative "comparison_clients"
require_relative "case_runner"
require_relative "case_matrix"
require_relative "results_header"

module Bench
  # Settings shared by benchmark/comparison.rb and stress.rb. `jobs` maps a
  # scenario name to jobs per case.
  SuiteSettings = Struct.new(:clients, :scenarios, :concurrencies, :repetitions, :jobs, :case_timeout, :output_dir, :smoke,
                             keyword_init: true)

  # The run both harnesses share: calibrate the CPU job, run the case
  # matrix with every child process in one watched group, clean up.
  class Suite
    ROOT = File.expand_path("../..", __dir__)
    RESULTS_DIR = File.join(ROOT, "benchmark/results")

    attr_reader :work, :environment_line

    # Parses the variables both harnesses take, under their own prefix
    # (BENCHMARK_ or STRESS_). A smoke run writes to a temporary directory
    # unless BENCH_OUTPUT_DIR says otherwise, so it never overwrites the
    # committed results.
    def self.settings(env, prefix:, defaults:, jobs:)
      smoke = env["BENCH_SMOKE"] == "1"
      SuiteSettings.new(
        clients: EnvLists.choices(env, "#{prefix}CLIENTS", Clients.names, defaults.fetch(:clients)),
        scenarios: EnvLists.choices(env, "#{prefix}SCENARIOS", Scenarios.names, defaults.fetch(:scenarios)),
        concurrencies: EnvLists.positive_integers(env, "#{prefix}CONCURRENCY", defaults.fetch(:concurrencies)),
        repetitions: Bench.positive_integer(env, "#{prefix}REPETITIONS", defaults.fetch(:repetitions)),
        jobs: jobs,
        case_timeout: Bench.positive_integer(env, "BENCH_CASE_TIMEOUT", defaults.fetch(:case_timeout)),
        output_dir: env["BENCH_OUTPUT_DIR"] || (smoke ? Dir.mktmpdir("solid-jobs-bench-smoke") : RESULTS_DIR),
        smoke: smoke
      )
    end

    def initialize(settings, ledger:)
      @settings = settings
      @ledger = ledger
    end

    def run
      $stdout.sync = true
      load_at_start = Environment.load_average
      @children = ChildGroup.new
      @scratch = Dir.mktmpdir("sjb")
      calibrate
      matrix = CaseMatrix.new(runner, clients: @settings.clients, scenarios: @settings.scenarios.map { |name| Scenarios.fetch(name) },
                                      concurrencies: @settings.concurrencies, repetitions: @settings.repetitions, jobs: @settings.jobs)
      puts "#{matrix.case_count} runs; jobs per case: #{@settings.jobs.slice(*@settings.scenarios).map { |s, n| "#{s} #{n}" }.join(", ")}; " \
           "cpu job = #{@work.cpu_iterations} iterations (#{format("%.2f", @work.cpu_ms)} ms here); load average #{load_at_start}"
      cases = matrix.run
      @environment_line = ResultsHeader.line(redis_version: ResultsHeader.redis_server_version, load_at_start: load_at_start,
                                             modified: "+modified", load_at_end: true)
      cases
    ensure
      @children&.close
      FileUtils.rm_rf(@scratch) if @scratch
    end

    def run_time = Time.now.utc.strftime("%Y-%m-%d %H:%M UTC")

    private

    def calibrate
      calibrated = CpuCalibration.for_seconds(Scenarios::CPU_JOB_SECONDS)
      @work = Work.new(cpu_iterations: calibrated.iterations, cpu_ms: calibrated.milliseconds, io_seconds: Scenarios::IO_JOB_SECONDS)
    end

    def runner
      CaseRunner.new(children: @children, work: @work, timeout: @settings.case_timeout, scratch: @scratch, ledger: @ledger)
    end
  end
end
