# frozen_string_literal: true

# What a concurrency limit costs a drain (docs/flow-control.md, "Cost"): the
# same no-op job, unlimited and limited, drained side by side in one run by
# one `solid-jobs` process, each case against a fresh private redis-server,
# with the method of benchmark/comparison.rb (support/drain.rb).
#
#   bundle exec rake benchmark:flow
#   BENCH_SMOKE=1 bundle exec rake benchmark:flow   # seconds, for tests
#
# Scenarios (the tasks are at the end of benchmark/jobs.rb; every one is
# seeded with the same (key, n) lists, keys k0..k999 in turn):
#   unlimited       SolidFlowUnlimited: no limit (the baseline)
#   limited-spread  SolidFlowSpread: 1,000 keys, limit 5 each; slots are taken
#                   and freed, a job is (almost) never over its limit
#   limited-hot     SolidFlowHot: one key, limit 8 (= the default workers);
#                   the claims set aside what the slots cannot take, so most
#                   jobs are blocked once and moved back by a release
#
# Environment (defaults in parentheses):
#   BENCH_SCENARIOS     comma list (unlimited,limited-spread,limited-hot)
#   BENCH_CONCURRENCY   comma list of workers in the one process (8)
#   BENCH_REPETITIONS   runs per case, the cases alternating within each (3)
#   BENCH_JOBS          jobs per case: one number, or scenario=number pairs (50000)
#   BENCH_CASE_TIMEOUT  seconds a drain may take before the run fails (300)
#   BENCH_NOTE          a line for the results header (what else ran on the host)
#   BENCH_SMOKE=1       tiny sizes, c=2, one run
#   BENCH_OUTPUT_DIR    where flow.{md,csv} go (benchmark/results; nowhere in a smoke run)
#
# Exit status is non-zero when a case had errors or could not be measured.

require_relative "support/drain"
require_relative "jobs"

module Bench
  FLOW_KEYS = 1000

  FLOW_SCENARIOS = [
    ["unlimited", "FlowUnlimited", "No limit: the baseline"],
    ["limited-spread", "FlowSpread", "concurrency: {limit: 5, key: 1,000 keys}: slots taken and freed, jobs (almost) never " \
                                     "over their limit"],
    ["limited-hot", "FlowHot", "concurrency: {limit: 8}, one key: what the slots cannot take is blocked and moved back " \
                               "by a release"]
  ].to_h do |name, twin, description|
    [name, Scenario.new(name: name, twin: twin, arguments: ->(n, _work) { ["k#{n % FLOW_KEYS}", n] },
                        description: description)]
  end.freeze

  # SolidJobs on Redis with an exact end of drain. The comparison's test
  # (channel empty, then every claim empty, two polls) is sound only while
  # the channel cannot refill, and here a release moves blocked jobs back
  # into it: between the two polls the last holders can ack, move their
  # keys' blocked jobs back and leave no claim. `ack.lua` counts a job
  # processed in the call that removes its claim, so processed + failed
  # reaching the seeded number is the drain's end, read in one command.
  class FlowRedisSystem < SolidRedisSystem
    COUNTERS = %w[solid_jobs:metric:processed solid_jobs:metric:failed].freeze

    def seed(job, lists)
      super
      @seeded_jobs = lists.size
    end

    def drained? = redis(:mget, *COUNTERS).sum(&:to_i) >= @seeded_jobs
  end

  class Flow < DrainHarness
    BASELINE = "unlimited"
    # 50,000 no-op jobs drain in about a second unlimited; limited-hot takes
    # longest. Three repetitions: the host is shared, and the median of
    # three alternating runs is the figure.
    DEFAULTS = {clients: ["solid-jobs"], scenarios: FLOW_SCENARIOS.keys, concurrencies: [8], repetitions: 3, timeout: 300,
                jobs: FLOW_SCENARIOS.keys.to_h { |s| [s, 50_000] }}.freeze
    SMOKE = {clients: ["solid-jobs"], scenarios: FLOW_SCENARIOS.keys, concurrencies: [2], timeout: 60,
             jobs: FLOW_SCENARIOS.keys.to_h { |s| [s, 400] }}.freeze
    LEDGER = false

    CSV_HEADER = %w[scenario concurrency jobs runs measured_runs jobs_per_s_median jobs_per_s_min jobs_per_s_max
                    jobs_per_s_vs_unlimited drain_seconds worker_cpu_percent worker_cpu_s_per_1k_jobs
                    redis_cpu_s_per_1k_jobs redis_commands_per_job scripts_per_job script_usec_per_job blocked_per_job
                    errors error_detail].freeze

    METHOD = <<~TEXT.strip
      **Method.** benchmark/comparison.rb's drain (support/drain.rb), SolidJobs on Redis only (SolidEngine refuses limited
      jobs). Every case starts from a fresh private redis-server (no persistence); the benchmark process seeds every job
      with `enqueue_many` (the key Proc runs there, at enqueue), then starts one `solid-jobs` process with `--concurrency`
      workers. The drain is timed from the first poll (every 5 ms) that sees a job taken to the first that sees the channel
      empty and `metric:processed` + `metric:failed` at the seeded number (`ack.lua` counts a job in the call that
      removes its claim; the comparison's "no claim left" test would race with a release moving blocked jobs back). The
      cases alternate within each repetition, and every figure of a row comes from its median run by jobs/s.

      **Columns.** *jobs/s* and *vs unlimited*: jobs / drain seconds, and its ratio to the unlimited case at the same
      concurrency. *Worker CPU %*, *Worker CPU-s/1k jobs*: utime+stime of the worker process over the drain (% of one
      core). *Redis CPU-s/1k jobs*: the same for redis-server. *Redis cmds/job*: INFO commandstats delta from worker start
      to the end of the drain, less the benchmark's probes (commands inside scripts count). *Scripts/job*: EVALSHA calls
      (round trips of claims, acks, heartbeats) per job. *Script µs/job*: Redis' own time in those calls (commandstats
      `usec` of EVALSHA). *Blocked/job*: `metric:blocked` (jobs a claim set aside over the limit) per job.
    TEXT

    private

    def catalog = FLOW_SCENARIOS
    def client_names = ["solid-jobs"]
    def system_of(name) = FlowRedisSystem.new(name, "SolidJobs on Redis (Ractors)")

    def report(cases)
      @cases = cases
      note = @settings.note
      publish("flow", title: "Concurrency limits: cost in a drain",
                      intro: [(note && "**Note.** #{note}"), "#{sizes_line}\nGenerated by `bundle exec rake benchmark:flow`.",
                              METHOD].compact.join("\n\n"),
                      body: ["## Results", "", *@scenarios.map { |s| "- *#{s}*: #{FLOW_SCENARIOS.fetch(s).description}." }, "",
                             table, "", "## Ratios", "", *ratio_lines.map { |l| "- #{l}" }].join("\n"),
                      csv: Bench.csv(CSV_HEADER, cases.map { |c| csv_row(c) }))
    end

    def sizes_line
      "Jobs per case: #{@jobs.slice(*@scenarios).map { |s, n| "#{s} #{n}" }.join(", ")}; no-op jobs. " \
        "#{@repetitions} run(s) per case. Run at #{run_time}."
    end

    def find(scenario, concurrency) = @cases.find { |c| c.scenario == scenario && c.concurrency == concurrency }

    def versus(c)
      base = find(BASELINE, c.concurrency)
      return nil if c.scenario == BASELINE || !base&.measured? || !c.measured?

      c.jobs_per_second / base.jobs_per_second
    end

    def table
      rows = @cases.sort_by { |c| [c.concurrency, @scenarios.index(c.scenario)] }.map do |c|
        run = c.median_run
        flag = c.ok? ? "0" : "**#{c.error_count}**: #{c.error_text}"
        next [c.concurrency, c.scenario, "not measured", *Array.new(9, ""), flag] unless run

        spread = c.rates.size > 1 ? "#{Bench.delimit(c.rates.min)}–#{Bench.delimit(c.rates.max)}" : ""
        [c.concurrency, c.scenario, Bench.delimit(c.jobs_per_second), spread, versus(c)&.then { |v| format("%.2fx", v) } || "",
         format("%.0f", run.worker_cpu_percent), format("%.3f", run.worker_cpu_per_thousand),
         format("%.3f", run.server_cpu_per_thousand), format("%.2f", run.commands_per_job),
         format("%.3f", run.script_calls_per_job), format("%.1f", run.script_usec_per_job),
         format("%.2f", run.counts.fetch(:blocked, 0).fdiv(run.jobs)), flag]
      end
      Bench.table(["c", "Scenario", "jobs/s", "min–max", "vs unlimited", "Worker CPU %", "Worker CPU-s/1k jobs",
                   "Redis CPU-s/1k jobs", "Redis cmds/job", "Scripts/job", "Script µs/job", "Blocked/job", "Errors"], rows)
    end

    # Each limited case against the unlimited one at the same concurrency.
    def ratio_lines
      @cases.reject { |c| c.scenario == BASELINE }.map do |c|
        base = find(BASELINE, c.concurrency)
        what = "#{c.scenario} / unlimited at c=#{c.concurrency}"
        next "n/a   #{what} (needs both cases measured)" unless base&.measured? && c.measured?

        run, ref = c.median_run, base.median_run
        line = format("%s: jobs/s %.2fx, worker CPU-s/1k jobs %s, Redis CPU-s/1k jobs %s, Redis cmds/job %+.2f " \
                      "(%.2f vs %.2f), script µs/job %s",
                      what, versus(c), ratio(run.worker_cpu_per_thousand, ref.worker_cpu_per_thousand),
                      ratio(run.server_cpu_per_thousand, ref.server_cpu_per_thousand),
                      run.commands_per_job - ref.commands_per_job, run.commands_per_job, ref.commands_per_job,
                      ratio(run.script_usec_per_job, ref.script_usec_per_job))
        c.ok? && base.ok? ? line : "#{line} -- with errors: #{[c, base].reject(&:ok?).map(&:scenario).join(" and ")}"
      end
    end

    # "1.25x"; "n/a" when the baseline measured no time at all (CPU is
    # counted in 10 ms ticks, which a short drain may not see).
    def ratio(value, reference) = reference.positive? ? format("%.2fx", value / reference) : "n/a"

    def csv_row(c)
      run = c.median_run
      measured = if run
                   [c.jobs_per_second.round(1), c.rates.min.round(1), c.rates.max.round(1), versus(c)&.round(4),
                    run.seconds.round(4), run.worker_cpu_percent.round(1), run.worker_cpu_per_thousand.round(4),
                    run.server_cpu_per_thousand.round(4), run.commands_per_job.round(4), run.script_calls_per_job.round(4),
                    run.script_usec_per_job.round(2), run.counts.fetch(:blocked, 0).fdiv(run.jobs).round(4)]
                 else
                   Array.new(12)
                 end
      [c.scenario, c.concurrency, c.jobs, c.runs.size, c.measured_runs.size, *measured, c.error_count, c.error_text]
    end
  end
end

exit Bench::Flow.main if $PROGRAM_NAME == __FILE__
