# frozen_string_literal: true

# SolidJobs against Sidekiq on one machine: the same jobs (benchmark/jobs.rb),
# each system through its own CLI, each case against a fresh private
# redis-server (and a fresh SolidEngine server for the engine clients).
#
#   bundle exec rake benchmark:comparison
#   BENCH_SMOKE=1 bundle exec rake benchmark:comparison   # seconds, for tests
#
# Clients: sidekiq (Sidekiq 6.4, one process, -c N), sidekiq-procs (N
# Sidekiq processes, -c 1 each), solid-jobs (Redis, Ractors),
# solid-jobs-engine (SolidEngine, memory durability, Ractors),
# solid-jobs-engine-threads (SolidEngine, --execution-mode thread).
#
# Environment (defaults in parentheses):
#   BENCH_CLIENTS       comma list (all five)
#   BENCH_SCENARIOS     comma list (noop,process-cpu,process-io,process-mixed);
#                       also process-io-50ms, each job a 50 ms sleep (the
#                       process-io twin, I/O-bound), only when listed here
#   BENCH_CONCURRENCY   comma list (1,2,4,8), or lists per scenario:
#                       scenario=list groups separated by ";", a group
#                       without a name for the scenarios not named
#                       ('process-cpu=1,2;process-io-50ms=8,32')
#   BENCH_REPETITIONS   runs per case; the table shows the median and the
#                       min–max of jobs/s (1)
#   BENCH_JOBS          jobs per case: one number, or scenario=number pairs
#                       (noop=100000,process-cpu=4000,process-io=4000,process-mixed=4000,
#                       process-io-50ms=800: about 5 s at c=8)
#   BENCH_CASE_TIMEOUT  seconds a drain may take before the run fails (300)
#   BENCH_SMOKE=1       tiny sizes, c=1, three clients, two scenarios
#   BENCH_OUTPUT_DIR    where comparison.{md,csv} and the PNGs go
#                       (benchmark/results; nowhere in a smoke run)
#
# Issue 19's Redis cost (the "Redis cost" table and PASS/MISS lines):
#
#   BENCH_SCENARIOS=process-cpu,process-io-50ms BENCH_CLIENTS=sidekiq,solid-jobs \
#     BENCH_CONCURRENCY='process-cpu=1,2;process-io-50ms=8,32' bundle exec rake benchmark:comparison
#
# Exit status is non-zero when a case had errors or could not be measured;
# missing a performance target is a result (PASS/MISS lines), not an error.

require_relative "support/drain"
require "sidekiq"
require "open3"
require_relative "jobs"

module Bench
  class Comparison < DrainHarness
    # Sized so the full default run (5 clients x 4 scenarios x 4
    # concurrencies, one repetition) takes 15-20 minutes on a 2-core host.
    # Every drain then lasts about a second or more for the fastest client,
    # long enough that the 5 ms poll, 10 ms CPU ticks and 50 ms memory
    # samples are noise.
    # process-io-50ms is not in the default list: 800 jobs are about 5 s at
    # c=8 but 40 s at c=1 for every client.
    DEFAULTS = {clients: SYSTEMS.keys, scenarios: DEFAULT_SCENARIOS, concurrencies: [1, 2, 4, 8], timeout: 300,
                jobs: {"noop" => 100_000, "process-cpu" => 4000, "process-io" => 4000, "process-mixed" => 4000,
                       "process-io-50ms" => 800}}.freeze
    SMOKE = {clients: %w[sidekiq solid-jobs solid-jobs-engine], scenarios: %w[noop process-mixed], concurrencies: [1],
             timeout: 30, jobs: {"noop" => 2000, "process-cpu" => 30, "process-io" => 40, "process-mixed" => 40,
                                 "process-io-50ms" => 20}}.freeze
    LEDGER = false

    NOOP_TARGET = 10.0
    CPU_TARGETS = {"sidekiq" => 1.8, "sidekiq-procs" => 1.0}.freeze
    IO_TARGET = 1.0
    MEMORY_TARGET = 1.0 / 3
    CPU_CONCURRENCY = 2
    LARGE_CONCURRENCY = 8
    # Issue 19: on these scenarios, at every concurrency measured, SolidJobs
    # on Redis sends at most this many commands per job, and costs Redis no
    # more CPU per job than Sidekiq.
    REDIS_COST_SCENARIOS = %w[process-cpu process-io-50ms].freeze
    COMMANDS_TARGET = 1.5
    REDIS_COST_COLUMNS = ["Scenario", "c", "solid-jobs cmds/job", "sidekiq cmds/job", "solid-jobs Redis CPU-s/1k",
                          "sidekiq Redis CPU-s/1k", "Redis CPU ratio", "jobs/s ratio", "solid-jobs scripts/job", "µs/script",
                          "Verdict"].freeze
    CSV_HEADER = %w[scenario concurrency client jobs runs measured_runs jobs_per_s_median jobs_per_s_min jobs_per_s_max
                    drain_seconds worker_cpu_percent worker_cpu_s_per_1k_jobs server_cpu_s_per_1k_jobs peak_pss_mb
                    allocations_per_job redis_commands_per_job errors error_detail script_calls_per_job
                    usec_per_script_call redis_usec_per_job].freeze

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
      do not use Redis, and their column shows what their workers sent to the case's idle redis-server (0). *Scripts/job*:
      EVALSHA calls per job over the same window; *µs/script*: Redis' own time per EVALSHA (commandstats `usec`, which
      includes the commands the script runs). In the CSV, *redis_usec_per_job* sums the `usec` of every command over the
      window (probe calls' share removed); a command run by a script counts both in its own `usec` and in the EVALSHA's, so
      for a client that uses scripts it is an upper bound of Redis' time on its behalf. *Errors*: failed
      jobs, jobs lost or completed more than once by the system's own counters (Sidekiq stat:processed/failed, SolidJobs
      metric:processed/failed, SolidEngine acked/failed/retried totals), and worker processes that did not stop cleanly on TERM
      (needed KILL, exited non-zero, or skipped their exit hooks); a case with errors is flagged in bold and cannot pass a target.
    TEXT

    private

    def report(cases)
      @cases = cases
      tables = cases.map(&:scenario).uniq.map do |scenario|
        "### #{scenario}\n\n#{SCENARIOS.fetch(scenario).description}.\n\n#{table(scenario)}"
      end
      targets = target_lines + notes
      cost = redis_cost
      plots = ScalingPlots.new(cases, @settings.output_dir).write if @settings.output_dir
      images = plots&.map { |p| "![#{File.basename(p, ".png")}](#{File.basename(p)})" }
      plot_lines = plots&.any? ? ["", "## Plots", "", *images] : []
      publish("comparison", title: "SolidJobs vs Sidekiq: comparison",
                            intro: "#{sizes_line}\nGenerated by `bundle exec rake benchmark:comparison`.\n\n#{METHOD}",
                            body: ["## Results", "", tables.join("\n\n"), "", "## Targets", "", *targets.map { |l| "- #{l}" },
                                   *cost, *plot_lines].join("\n"),
                            csv: Bench.csv(CSV_HEADER, cases.map { |c| csv_row(c) }))
    end

    def find(client, scenario, concurrency)
      @cases.find { |c| c.client == client && c.scenario == scenario && c.concurrency == concurrency }
    end

    def concurrencies(scenario) = @cases.select { |c| c.scenario == scenario }.map(&:concurrency).uniq.sort

    # One table per scenario: rows by concurrency, then client.
    def table(scenario)
      rows = @cases.select { |c| c.scenario == scenario }.sort_by { |c| [c.concurrency, *ClientNames.order(c.client)] }.map do |c|
        run = c.median_run
        flag = c.ok? ? "0" : "**#{c.error_count}**: #{c.error_text}"
        next [c.concurrency, c.client, "not measured", *Array.new(10, ""), flag] unless run

        sidekiq = find("sidekiq", c.scenario, c.concurrency)
        versus = sidekiq&.measured? && c.client != "sidekiq" ? format("%.2fx", c.jobs_per_second / sidekiq.jobs_per_second) : ""
        commands = format("%.2f", run.commands_per_job) + (Bench.system(c.client).uses_redis? ? "" : " (no Redis)")
        spread = c.rates.size > 1 ? "#{Bench.delimit(c.rates.min)}–#{Bench.delimit(c.rates.max)}" : ""
        [c.concurrency, c.client, Bench.delimit(c.jobs_per_second), spread,
         versus, format("%.0f", run.worker_cpu_percent), format("%.2f", run.worker_cpu_per_thousand),
         format("%.2f", run.server_cpu_per_thousand), format("%.1f", run.peak_pss_mb),
         run.allocations_per_job ? format("%.1f", run.allocations_per_job) : "n/a", commands,
         format("%.3f", run.script_calls_per_job), run.usec_per_script_call&.then { |u| format("%.1f", u) } || "", flag]
      end
      Bench.table(["c", "Client", "jobs/s", "min–max", "vs sidekiq", "Worker CPU %", "Worker CPU-s/1k jobs",
                   "Server CPU-s/1k jobs", "Peak PSS MB", "Allocs/job", "Redis cmds/job", "Scripts/job", "µs/script",
                   "Errors"], rows)
    end

    def csv_row(c)
      run = c.median_run
      measured = if run
                   [c.jobs_per_second.round(1), c.rates.min.round(1), c.rates.max.round(1), run.seconds.round(4),
                    run.worker_cpu_percent.round(1), run.worker_cpu_per_thousand.round(4), run.server_cpu_per_thousand.round(4),
                    run.peak_pss_mb.round(2), run.allocations_per_job&.round(2), run.commands_per_job.round(4)]
                 else
                   Array.new(10)
                 end
      scripts = []
      scripts = [run.script_calls_per_job.round(4), run.usec_per_script_call&.round(2), run.redis_usec_per_job.round(2)] if run
      [c.scenario, c.concurrency, c.client, c.jobs, c.runs.size, c.measured_runs.size, *measured, c.error_count, c.error_text,
       *scripts]
    end

    # "PASS ...", "MISS ..." or "n/a ..." (a case not run or not measured);
    # a case with errors cannot pass.
    def target_lines
      noop = concurrencies("noop").map do |c|
        ratio_line("solid-jobs", "sidekiq", "noop", c, NOOP_TARGET)
      end
      cpu = CPU_TARGETS.map { |other, target| ratio_line("solid-jobs", other, "process-cpu", CPU_CONCURRENCY, target) }
      io = ratio_line("solid-jobs", "sidekiq", "process-io", LARGE_CONCURRENCY, IO_TARGET)
      [*noop, *cpu, io, *memory_lines, *redis_cost_cases.flat_map { |s, c| redis_cost_lines(s, c) }].compact
    end

    # [scenario, concurrency] of the Redis-cost targets this run has a case of.
    def redis_cost_cases
      REDIS_COST_SCENARIOS.flat_map { |scenario| concurrencies(scenario).map { |c| [scenario, c] } }
                          .select { |scenario, c| find("solid-jobs", scenario, c) || find("sidekiq", scenario, c) }
    end

    # Issue 19's targets at one scenario and concurrency: SolidJobs' Redis
    # commands per job, its Redis CPU per job against Sidekiq's, and (a
    # figure, not a target here: the target is against an earlier SolidJobs)
    # its jobs/s against Sidekiq's.
    def redis_cost_lines(scenario, concurrency)
      solid, sidekiq = find("solid-jobs", scenario, concurrency), find("sidekiq", scenario, concurrency)
      at = "#{scenario} at c=#{concurrency}"
      commands = if solid&.measured?
                   value = solid.median_run.commands_per_job
                   text = format("%s: solid-jobs Redis commands/job = %.2f (target <= %.1f)", at, value, COMMANDS_TARGET)
                   verdict(value <= COMMANDS_TARGET, [solid], text)
                 else
                   "n/a   #{at}: solid-jobs Redis commands/job (needs solid-jobs measured)"
                 end
      what = "#{at}: Redis CPU-s/1k jobs, solid-jobs / sidekiq"
      return [commands, "n/a   #{what} (needs both cases measured)"] unless solid&.measured? && sidekiq&.measured?

      mine, theirs = solid.median_run.server_cpu_per_thousand, sidekiq.median_run.server_cpu_per_thousand
      cpu = verdict(mine <= theirs, [solid, sidekiq],
                    format("%s = %.3f / %.3f%s (target <= sidekiq's)", what, mine, theirs,
                           theirs.positive? ? format(" = %.2fx", mine / theirs) : ""))
      rate = format("info  %s: solid-jobs / sidekiq jobs/s = %.2fx (%s / %s)", at, rate_ratio(solid, sidekiq),
                    Bench.delimit(solid.jobs_per_second), Bench.delimit(sidekiq.jobs_per_second))
      [commands, cpu, rate]
    end

    # The "Redis cost" section: the figures behind redis_cost_lines, one
    # row per scenario and concurrency; [] when the run has none of them.
    def redis_cost
      rows = redis_cost_cases.map do |scenario, c|
        solid, sidekiq = [find("solid-jobs", scenario, c), find("sidekiq", scenario, c)].map { |r| r&.measured? ? r : nil }
        mine, theirs = [solid, sidekiq].map { |r| r&.median_run }
        ratio = mine&.server_cpu_per_thousand&./(theirs.server_cpu_per_thousand) if theirs&.server_cpu_per_thousand&.positive?
        commands_ok = mine && solid.ok? && mine.commands_per_job <= COMMANDS_TARGET
        cpu_ok = mine && theirs && solid.ok? && sidekiq.ok? && mine.server_cpu_per_thousand <= theirs.server_cpu_per_thousand
        verdict = if mine.nil? || theirs.nil? then "n/a"
                  elsif commands_ok && cpu_ok then "PASS"
                  else "MISS (#{[("cmds/job" unless commands_ok), ("Redis CPU" unless cpu_ok)].compact.join(", ")})"
                  end
        figure = ->(run, f, metric) { run ? format(f, run.public_send(metric)) : "" }
        [scenario, c, figure.(mine, "%.2f", :commands_per_job), figure.(theirs, "%.2f", :commands_per_job),
         figure.(mine, "%.3f", :server_cpu_per_thousand), figure.(theirs, "%.3f", :server_cpu_per_thousand),
         ratio ? format("%.2fx", ratio) : "", solid && sidekiq ? format("%.2fx", rate_ratio(solid, sidekiq)) : "",
         figure.(mine, "%.3f", :script_calls_per_job), mine&.usec_per_script_call&.then { |u| format("%.1f", u) } || "", verdict]
      end
      return [] if rows.empty?

      ["", "## Redis cost", "",
       "Issue 19's targets: on #{REDIS_COST_SCENARIOS.join(" and ")}, at every concurrency, solid-jobs sends Redis at most " \
       "#{COMMANDS_TARGET} commands per job (INFO commandstats, Lua-run commands included) and costs redis-server no more CPU " \
       "per 1,000 jobs than sidekiq. *Redis CPU ratio*: solid-jobs / sidekiq; *jobs/s ratio*: solid-jobs / sidekiq (a figure; " \
       "the throughput target is against an earlier SolidJobs); *scripts/job* and *µs/script*: solid-jobs' EVALSHA calls per " \
       "job and Redis' time per call.", "",
       Bench.table(REDIS_COST_COLUMNS, rows)]
    end

    def rate_ratio(solid, sidekiq) = solid.jobs_per_second / sidekiq.jobs_per_second

    # Engine clients should send Redis no command.
    def notes
      engine = @cases.select { |c| !Bench.system(c.client).uses_redis? && c.measured? }
      return [] if engine.empty?

      stray = engine.reject { |c| c.median_run.commands.empty? }
      [stray.empty? ? "SolidEngine clients sent no Redis commands in any case (their column reads 0)." :
        "SolidEngine clients sent Redis commands in: " \
        "#{stray.map { |c| "#{c.scenario} c=#{c.concurrency} #{c.client}" }.join(", ")}."]
    end

    def ratio_line(client, other, scenario, concurrency, target)
      numerator, denominator = find(client, scenario, concurrency), find(other, scenario, concurrency)
      return nil unless numerator || denominator

      what = "#{scenario} at c=#{concurrency}: #{client} / #{other} jobs/s"
      return "n/a   #{what} (needs both cases measured)" unless numerator&.measured? && denominator&.measured?

      value = numerator.jobs_per_second / denominator.jobs_per_second
      verdict(value >= target, [numerator, denominator], format("%s = %.2fx (target >= %.1fx)", what, value, target))
    end

    def memory_lines
      @cases.map(&:scenario).uniq.filter_map do |scenario|
        solid, procs = find("solid-jobs", scenario, LARGE_CONCURRENCY), find("sidekiq-procs", scenario, LARGE_CONCURRENCY)
        next unless solid || procs

        what = "peak memory (PSS, workers + servers) at c=#{LARGE_CONCURRENCY}, #{scenario}: solid-jobs / sidekiq-procs"
        next "n/a   #{what} (needs both cases measured)" unless solid&.measured? && procs&.measured?

        value = solid.median_run.peak_pss_kb.fdiv(procs.median_run.peak_pss_kb)
        verdict(value <= MEMORY_TARGET, [solid, procs], format("%s = %.2f (%.0f MB / %.0f MB; target <= 0.33)", what, value,
                                                               solid.median_run.peak_pss_mb, procs.median_run.peak_pss_mb))
      end
    end

    def verdict(met, cases, text)
      errors = cases.reject(&:ok?)
      return "#{(met ? "PASS" : "MISS").ljust(5)} #{text}" if errors.empty?

      "MISS  #{text} -- not a pass: #{errors.map(&:client).join(" and ")} had errors"
    end
  end

  # PNG plots of the scaling curves with gnuplot: jobs/s against
  # concurrency, one line per client, one file per scenario; and peak
  # memory against concurrency, one panel per scenario, in one file.
  # Without gnuplot the plots are skipped (a note, not a failure).
  class ScalingPlots
    SIZE = "900,560"
    PANEL = [600, 450].freeze

    def initialize(cases, dir)
      @cases = cases
      @dir = dir
      @scenarios = cases.map(&:scenario).uniq
      @clients = cases.map(&:client).uniq
      @concurrencies = cases.map(&:concurrency).uniq.sort
    end

    # Paths written; [] (with a printed note) when gnuplot is missing or fails.
    def write
      terminal = png_terminal or return skip("gnuplot not found; no plots written")

      FileUtils.mkdir_p(@dir)
      Dir.mktmpdir("plots") do |data_dir|
        paths = @scenarios.map { |scenario| plot(terminal, "comparison-#{scenario}.png", throughput_script(scenario, data_dir)) }
        columns = [@scenarios.size, 2].min
        size = "#{PANEL[0] * columns},#{PANEL[1] * ((@scenarios.size + 1) / 2)}"
        paths << plot(terminal, "comparison-memory.png", memory_script(data_dir, columns), size: size)
        paths.compact
      end
    end

    private

    # pngcairo draws antialiased lines; Debian's gnuplot-nox has it, other
    # builds may have only the libgd png terminal.
    def png_terminal
      %w[pngcairo png].find { |terminal| Open3.capture2e("gnuplot", "-e", "set terminal #{terminal}").last.success? }
    rescue SystemCallError
      nil
    end

    def skip(note)
      puts "Plots: #{note}"
      []
    end

    def plot(terminal, name, script, size: SIZE)
      path = File.join(@dir, name)
      out, status = Open3.capture2e("gnuplot",
                                    stdin_data: "set terminal #{terminal} size #{size}\nset output '#{path}'\n#{script}")
      return path if status.success? && File.exist?(path)

      puts "Plots: gnuplot failed for #{name}: #{out.scrub.lines.last(3).join.strip}"
      nil
    end

    # One row per concurrency, one column per client; NaN where a case is
    # missing or was not measured (gnuplot leaves a gap).
    def data_file(data_dir, name, scenario)
      path = File.join(data_dir, name)
      rows = @concurrencies.map do |c|
        values = @clients.map do |client|
          result = @cases.find { |r| r.scenario == scenario && r.client == client && r.concurrency == c }
          result&.measured? ? yield(result) : "NaN"
        end
        [c, *values].join(" ")
      end
      File.write(path, "#{rows.join("\n")}\n")
      path
    end

    def plot_lines(path)
      @clients.each_with_index.map do |client, i|
        "'#{path}' using 1:#{i + 2} with linespoints lw 2 pt 7 title '#{client}'"
      end.join(", ")
    end

    def axes
      "set logscale x 2\nset xtics (#{@concurrencies.join(", ")})\n" \
        "set xrange [#{@concurrencies.first * 0.8}:#{@concurrencies.last * 1.25}]\n" \
        "set grid\nset key outside right top\nset xlabel 'concurrency (threads, Ractors or processes)'\n"
    end

    def throughput_script(scenario, data_dir)
      path = data_file(data_dir, "#{scenario}.dat", scenario, &:jobs_per_second)
      rates = @cases.select { |r| r.scenario == scenario && r.measured? }.map(&:jobs_per_second)
      # noop spans an order of magnitude between clients: log scale keeps the
      # slow lines readable.
      log = rates.any? && rates.min.positive? && rates.max / rates.min > 10
      "#{axes}set title '#{scenario}: jobs/s (median) by concurrency'\nset ylabel 'jobs/s#{" (log scale)" if log}'\n" \
        "#{log ? "set logscale y\n" : "set yrange [0:*]\n"}plot #{plot_lines(path)}\n"
    end

    def memory_script(data_dir, columns)
      panels = @scenarios.map do |scenario|
        path = data_file(data_dir, "#{scenario}-memory.dat", scenario) { |r| r.median_run.peak_pss_mb.round(1) }
        "set title '#{scenario}: peak PSS, workers + servers (MB)'\nplot #{plot_lines(path)}\n"
      end
      "set size 1,1\nset multiplot layout #{(@scenarios.size + 1) / 2},#{columns}\n#{axes}set yrange [0:*]\nset ylabel 'MB'\n" \
        "set key inside left top\n#{panels.join}unset multiplot\n"
    end
  end
end

exit Bench::Comparison.main if $PROGRAM_NAME == __FILE__
