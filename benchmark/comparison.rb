# frozen_string_literal: true

# SolidJobs against Sidekiq on one machine: the same jobs (benchmark/jobs.rb),
# each system through its own CLI, each case against a fresh private
# redis-server (and a fresh SolidEngine server for the engine clients).
#
#   bundle exec rake comparison
#   BENCH_SMOKE=1 bundle exec rake comparison   # seconds, for tests
#
# Clients: sidekiq (Sidekiq 6.4, one process, -c N), sidekiq-procs (N
# Sidekiq processes, -c 1 each), solid-jobs (Redis, Ractors),
# solid-jobs-engine (SolidEngine, memory durability, Ractors),
# solid-jobs-engine-threads (SolidEngine, --execution-mode thread).
# Scenarios: see support/scenarios.rb.
#
# Environment (defaults in parentheses):
#   BENCHMARK_CLIENTS      comma list (all five)
#   BENCHMARK_SCENARIOS    comma list (noop,process-cpu,process-io,process-mixed)
#   BENCHMARK_CONCURRENCY  comma list (1,2,4,8)
#   BENCHMARK_REPETITIONS  runs per case; the table shows the median and
#                          the min–max of jobs/s (1)
#   BENCHMARK_NOOP_JOBS, BENCHMARK_CPU_JOBS, BENCHMARK_IO_JOBS,
#   BENCHMARK_MIXED_JOBS   jobs per case (see DEFAULT_JOBS)
#   BENCH_CASE_TIMEOUT     seconds a drain may take before the run fails
#                          (300; 30 in smoke mode)
#   BENCH_SMOKE=1          tiny sizes, c=1, three clients, two scenarios;
#                          results go to a temporary directory
#   BENCH_OUTPUT_DIR       where comparison.{md,csv} and the PNGs go
#                          (benchmark/results)
#
# Exit status is non-zero when a case had errors or could not be measured;
# missing a performance target is a result (PASS/MISS lines), not an error.

$LOAD_PATH.unshift(File.expand_path("../lib", __dir__))
require "solid_jobs"
require "sidekiq"
require "redis"
require_relative "support/harness"
require_relative "support/suite"
require_relative "support/comparison_report"
require_relative "support/scaling_plots"
require_relative "jobs"

module Bench
  class Comparison < Harness
    # Sized so the full default run (5 clients x 4 scenarios x 4
    # concurrencies, one repetition) takes 15-20 minutes on a 2-core host:
    # from the rates of reduced runs, about 12 minutes of drains plus 3-4
    # of seeding, start and stop. Every drain then lasts about a second or
    # more for the fastest client, long enough that the 5 ms poll, 10 ms
    # CPU ticks and 50 ms memory samples are noise.
    DEFAULT_JOBS = {"noop" => 100_000, "process-cpu" => 4000, "process-io" => 4000, "process-mixed" => 4000}.freeze
    SMOKE_JOBS = {"noop" => 2000, "process-cpu" => 30, "process-io" => 40, "process-mixed" => 40}.freeze
    JOBS_VARIABLES = {"noop" => "BENCHMARK_NOOP_JOBS", "process-cpu" => "BENCHMARK_CPU_JOBS", "process-io" => "BENCHMARK_IO_JOBS",
                      "process-mixed" => "BENCHMARK_MIXED_JOBS"}.freeze
    DEFAULTS = {clients: Clients.names, scenarios: Scenarios.names, concurrencies: [1, 2, 4, 8], repetitions: 1, case_timeout: 300}.freeze
    SMOKE_DEFAULTS = DEFAULTS.merge(clients: %w[sidekiq solid-jobs solid-jobs-engine], scenarios: %w[noop process-mixed],
                                    concurrencies: [1], case_timeout: 30).freeze

    def self.failure_label = "comparison"

    def self.settings(env)
      smoke = smoke?(env)
      sizes = smoke ? SMOKE_JOBS : DEFAULT_JOBS
      jobs = JOBS_VARIABLES.to_h { |scenario, variable| [scenario, Bench.positive_integer(env, variable, sizes.fetch(scenario))] }
      Suite.settings(env, prefix: "BENCHMARK_", defaults: smoke ? SMOKE_DEFAULTS : DEFAULTS, jobs: jobs)
    end

    def run
      suite = Suite.new(@settings, ledger: false)
      cases = suite.run
      publish(suite, cases)
      cases.all?(&:ok?) ? 0 : 1
    end

    private

    def publish(suite, cases)
      report = ComparisonReport.new(cases)
      tables = report.scenarios.map { |scenario| "### #{scenario}\n\n#{Scenarios.fetch(scenario).description}.\n\n#{report.table(scenario)}" }
      targets = report.target_lines
      puts "", suite.environment_line, "", tables.join("\n\n"), "", "Targets:", *targets, *report.notes
      dir = @settings.output_dir
      plots = ScalingPlots.new(cases, dir, prefix: "comparison").write
      ResultsFiles.write_file(File.join(dir, "comparison.csv"), "# #{suite.environment_line}\n#{report.csv}")
      ResultsFiles.write_file(File.join(dir, "comparison.md"), markdown(suite, tables, targets, report.notes, plots))
      puts "", "Wrote #{File.join(dir, "comparison.md")}, comparison.csv#{plots.empty? ? "" : " and #{plots.size} plots"} in #{dir}"
    end

    def markdown(suite, tables, targets, notes, plots)
      work = suite.work
      <<~MD
        # SolidJobs vs Sidekiq: comparison

        #{suite.environment_line}

        Jobs per case: #{@settings.jobs.slice(*@settings.scenarios).map { |s, n| "#{s} #{n}" }.join(", ")}; process-cpu job =
        #{work.cpu_iterations} iterations of BenchCpu.spin (#{format("%.2f", work.cpu_ms)} ms when calibrated), process-io job =
        sleep #{(work.io_seconds * 1000).round} ms. #{@settings.repetitions} run(s) per case. Run at #{suite.run_time}.
        Generated by `bundle exec rake comparison`.

        #{METHOD}

        ## Results

        #{tables.join("\n\n")}

        ## Targets

        #{(targets + notes).map { |l| "- #{l}" }.join("\n")}
        #{plots.empty? ? "" : "\n## Plots\n\n#{plots.map { |p| "![#{File.basename(p, ".png")}](#{File.basename(p)})" }.join("\n")}\n"}
      MD
    end

    METHOD = <<~TEXT.strip
      **Method.** Every case starts from a fresh private redis-server (no persistence) and, for the SolidEngine clients, a
      fresh memory-durability solid-engine-server. The benchmark process pre-seeds every job through the system's own client
      API (Sidekiq `push_bulk`, SolidJobs `enqueue_many`), then starts the workers through their own CLIs. Sidekiq's jobs are
      seeded into a staging queue and renamed into the worked queue once every Sidekiq process has booted, so booting
      processes never share the timed window. The drain is timed from the first poll (every 5 ms) that sees a job taken to
      the first that sees none waiting or held (SolidJobs: list and claims empty, or SolidEngine STATS ready+scheduled+reserved
      = 0; Sidekiq: its queue empty, with at most one job per thread still finishing).

      **Columns.** *jobs/s*: jobs / drain seconds (median over runs; *min–max* when there are several). *Worker CPU %*:
      utime+stime of every worker process from /proc/<pid>/stat over the drain window, as % of one core (200 = both cores of a
      2-core host); *CPU-s/1k jobs*: the same CPU time per 1,000 jobs. *Server CPU-s/1k jobs*: the same for the server the
      client needs (redis-server, or solid-engine-server). *Peak PSS MB*: the largest sum, sampled every 50 ms during the drain,
      of the Linux proportional set size (/proc/<pid>/smaps_rollup) of all worker processes plus that server: the whole
      infrastructure the client needs, with shared library pages counted once. The seeded backlog lives in that server, so it
      is part of the figure. *Allocs/job*: GC.stat(:total_allocated_objects) in the worker process(es), from when
      benchmark/jobs.rb is loaded (after the library, before workers start) to process exit, divided by jobs; it includes
      worker start, heartbeats and the graceful stop. *Redis cmds/job*: INFO commandstats delta from worker start to the end
      of the drain, less the benchmark's own probe commands (commands run inside Lua scripts count too); SolidEngine clients
      do not use Redis, and their column shows what their workers sent to the case's idle redis-server (0). *Errors*: failed
      jobs, jobs lost or completed more than once by the system's own counters (Sidekiq stat:processed/failed, SolidJobs
      metric:processed/failed, SolidEngine acked/failed/retried totals), and worker processes that did not stop cleanly on TERM
      (needed KILL, exited non-zero, or skipped their exit hooks); a case with errors is flagged in bold and cannot pass a target.
    TEXT
  end
end

exit Bench::Comparison.main(ENV) if $PROGRAM_NAME == __FILE__
