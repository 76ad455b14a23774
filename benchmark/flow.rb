# frozen_string_literal: true

# What flow control costs a drain (docs/flow-control.md, "Cost"): the same
# no-op job, unlimited, under concurrency limits and under a rate, drained
# side by side in one run by one `solid-jobs` process, each case against a
# fresh private redis-server, with the method of benchmark/comparison.rb
# (support/drain.rb); and what a throttled backlog costs the unlimited jobs
# of its channel.
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
#   rate-spread     SolidFlowRateSpread: 1,000 keys at 100 starts per second
#                   each, 50 jobs per key: every admission is logged, none is
#                   ever refused (default slack)
#   unlimited-beside-throttled
#                   SolidFlowUnlimited again, with one SolidFlowThrottled job
#                   (one key, 10 starts per second) seeded after every 10 of
#                   them in the same list: the claims meet the backlog and set
#                   it aside while they drain the unlimited jobs. Only the
#                   unlimited jobs are counted and timed (the drain ends when
#                   they are done; the backlog would take minutes by design),
#                   so jobs/s and "vs unlimited" are the unlimited jobs' drain
#                   rate beside the backlog against the plain baseline
#
# Each case has its own redis-server and worker process, both stopped at its
# end, so a backlog left throttled cannot reach the next case.
#
# Environment (defaults in parentheses):
#   BENCH_SCENARIOS     comma list (all five)
#   BENCH_CONCURRENCY   comma list of workers in the one process (8)
#   BENCH_REPETITIONS   runs per case, the cases alternating within each (3)
#   BENCH_JOBS          jobs per case: one number, or scenario=number pairs (50000;
#                       unlimited-beside-throttled: the unlimited jobs, the
#                       backlog is a tenth of it on top)
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

  # A drain scenario (support/drain.rb's Scenario) that may seed a backlog
  # among its jobs: one `beside.twin` job after every `beside.every` of its
  # own, which the drain neither waits for nor counts.
  FlowScenario = Struct.new(:name, :twin, :arguments, :description, :beside, keyword_init: true) do
    def argument_lists(jobs, work) = Array.new(jobs) { |n| arguments.call(n, work) }
  end
  Backlog = Struct.new(:twin, :every, :description, keyword_init: true)

  THROTTLED_BACKLOG = Backlog.new(twin: "FlowThrottled", every: 10,
                                  description: "rate: {limit: 10, per: 1}, one key").freeze

  FLOW_SCENARIOS = [
    ["unlimited", "FlowUnlimited", "No limit: the baseline"],
    ["limited-spread", "FlowSpread", "concurrency: {limit: 5, key: 1,000 keys}: slots taken and freed, jobs (almost) never " \
                                     "over their limit"],
    ["limited-hot", "FlowHot", "concurrency: {limit: 8}, one key: what the slots cannot take is blocked and moved back " \
                               "by a release"],
    ["rate-spread", "FlowRateSpread", "rate: {limit: 100, per: 1, key: 1,000 keys}, 50 jobs per key: every " \
                                      "admission logged, none refused (default slack, 50 ms)"],
    ["unlimited-beside-throttled", "FlowUnlimited",
     "the unlimited jobs of the baseline, with one job of #{THROTTLED_BACKLOG.description} after every " \
     "#{THROTTLED_BACKLOG.every} of them in the same list; only the unlimited jobs are counted and timed",
     THROTTLED_BACKLOG]
  ].to_h do |name, twin, description, beside|
    [name, FlowScenario.new(name: name, twin: twin, arguments: ->(n, _work) { ["k#{n % FLOW_KEYS}", n] },
                            description: description, beside: beside)]
  end.freeze

  # SolidJobs on Redis with an exact end of drain. The comparison's test
  # (channel empty, then every claim empty, two polls) is sound only while
  # the channel cannot refill, and here a release moves blocked jobs back
  # into it: between the two polls the last holders can ack, move their
  # keys' blocked jobs back and leave no claim. `ack.lua` counts a job
  # processed in the call that removes its claim, so processed + failed
  # reaching the seeded number is the drain's end, read in one command.
  #
  # With a backlog beside the measured jobs, `metric:processed` also counts
  # the backlog jobs that ran; each of those wrote its line (FlowStarts)
  # before its ack, so processed + failed - lines never exceeds the measured
  # jobs completed: the drain never ends early, and ends at the first poll
  # after the last measured ack (a backlog job between its line and its ack
  # delays it by that ack).
  class FlowRedisSystem < SolidRedisSystem
    COUNTERS = %w[solid_jobs:metric:processed solid_jobs:metric:failed].freeze

    attr_writer :beside

    def seed(job, lists)
      @seeded_jobs = lists.size
      @backlog = 0
      return super unless @beside

      backlog_job = job(@beside.twin)
      lists.each_slice(@beside.every) do |slice|
        enqueue_many(job, slice)
        enqueue_many(backlog_job, [["hot", @backlog]])
        @backlog += 1
      end
    end

    # The harness checks the measured jobs only; the backlog is all in the
    # list too right after seeding.
    def seeded = waiting

    # The measured jobs still in the list, at least: the list less the whole
    # backlog. It drops below the seeded number at the first claim, as a
    # plain list does (the drain's start), and is 0 at the end, whatever of
    # the backlog is still in the list then.
    def waiting = [redis(:llen, LIST) - @backlog, 0].max

    def drained? = redis(:mget, *COUNTERS).sum(&:to_i) - backlog_started >= @seeded_jobs

    # The measured jobs' completions; complete once the workers stopped
    # (a graceful stop finishes every started job).
    def counts = super.then { |c| c.merge(processed: c[:processed] - backlog_started) }

    # `throttled`: jobs the claims set aside over a rate (a job throttled
    # twice counts twice); `backlog_started`: the backlog jobs that ran.
    def final_counts
      super.merge(throttled: @lab.redis.get("solid_jobs:metric:throttled").to_i, backlog_started: backlog_started)
    end

    private

    def starts_path = File.join(@lab.dir, "backlog-starts")
    def backlog_started = FlowStarts.count(starts_path)
    def worker_env = {"BENCH_FLOW_STARTS" => starts_path}
  end

  # The drain suite, telling the system which backlog its scenario seeds.
  class FlowSuite < DrainSuite
    private

    def seed(system, scenario, jobs)
      system.beside = scenario.beside
      super
    end
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
                    throttled_per_job backlog_jobs backlog_started errors error_detail].freeze

    METHOD = <<~TEXT.strip
      **Method.** benchmark/comparison.rb's drain (support/drain.rb), SolidJobs on Redis only (SolidEngine refuses limited
      jobs). Every case starts from a fresh private redis-server (no persistence); the benchmark process seeds every job
      with `enqueue_many` (the key Proc runs there, at enqueue), then starts one `solid-jobs` process with `--concurrency`
      workers. The drain is timed from the first poll (every 5 ms) that sees a job taken to the first that sees the channel
      empty and `metric:processed` + `metric:failed` at the seeded number (`ack.lua` counts a job in the call that
      removes its claim; the comparison's "no claim left" test would race with a release moving blocked jobs back). The
      cases alternate within each repetition, and every figure of a row comes from its median run by jobs/s.

      **Beside a throttled backlog.** *unlimited-beside-throttled* seeds one rate limited job (one key, 10 starts per
      second) after every 10 unlimited ones, in the same list, so each claim meets about one backlog job per ten it
      claims and sets it aside in `throttled:<key>`. Only the unlimited jobs are the case: *jobs* is their number, the
      drain ends at the first poll that sees all of them completed (`metric:processed` less the backlog jobs that ran,
      which each write a line before their ack), and every per-job column divides by them; the backlog's own starts
      (*Backlog run*) stay at the rate. Every case has its own redis-server and worker process, both stopped at its end,
      so no throttled job, rate log or wake reaches the next case.

      **Columns.** *jobs/s* and *vs unlimited*: jobs / drain seconds, and its ratio to the unlimited case at the same
      concurrency. *Worker CPU %*, *Worker CPU-s/1k jobs*: utime+stime of the worker process over the drain (% of one
      core). *Redis CPU-s/1k jobs*: the same for redis-server. *Redis cmds/job*: INFO commandstats delta from worker start
      to the end of the drain, less the benchmark's probes (commands inside scripts count). *Scripts/job*: EVALSHA calls
      (round trips of claims, acks, heartbeats) per job. *Script µs/job*: Redis' own time in those calls (commandstats
      `usec` of EVALSHA). *Blocked/job*: `metric:blocked` (jobs a claim set aside over the limit) per job. *Throttled/job*:
      `metric:throttled` (jobs a claim set aside over their rate) per job.
    TEXT

    private

    def catalog = FLOW_SCENARIOS
    def client_names = ["solid-jobs"]
    def system_of(name) = FlowRedisSystem.new(name, "SolidJobs on Redis (Ractors)")
    def suite_class = FlowSuite

    def report(cases)
      @cases = cases
      note = @settings.note
      publish("flow", title: "Flow control: cost in a drain",
                      intro: [(note && "**Note.** #{note}"), "#{sizes_line}\nGenerated by `bundle exec rake benchmark:flow`.",
                              METHOD].compact.join("\n\n"),
                      body: ["## Results", "", *@scenarios.map { |s| "- *#{s}*: #{FLOW_SCENARIOS.fetch(s).description}." }, "",
                             table, "", "## Ratios", "", *ratio_lines.map { |l| "- #{l}" }].join("\n"),
                      csv: Bench.csv(CSV_HEADER, cases.map { |c| csv_row(c) }))
    end

    def sizes_line
      "Jobs per case: #{@jobs.slice(*@scenarios).map { |s, n| "#{s} #{n}#{backlog_note(s, n)}" }.join(", ")}; no-op " \
        "jobs. #{@repetitions} run(s) per case. Run at #{run_time}."
    end

    def backlog_jobs(scenario, jobs) = FLOW_SCENARIOS.fetch(scenario).beside&.then { |b| jobs.fdiv(b.every).ceil }

    def backlog_note(scenario, jobs)
      backlog_jobs(scenario, jobs)&.then { |b| " (+ #{b} throttled beside them)" }
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
        next [c.concurrency, c.scenario, "not measured", *Array.new(11, ""), flag] unless run

        spread = c.rates.size > 1 ? "#{Bench.delimit(c.rates.min)}–#{Bench.delimit(c.rates.max)}" : ""
        [c.concurrency, c.scenario, Bench.delimit(c.jobs_per_second), spread, versus(c)&.then { |v| format("%.2fx", v) } || "",
         format("%.0f", run.worker_cpu_percent), format("%.3f", run.worker_cpu_per_thousand),
         format("%.3f", run.server_cpu_per_thousand), format("%.2f", run.commands_per_job),
         format("%.3f", run.script_calls_per_job), format("%.1f", run.script_usec_per_job),
         format("%.2f", run.counts.fetch(:blocked, 0).fdiv(run.jobs)),
         format("%.2f", run.counts.fetch(:throttled, 0).fdiv(run.jobs)), backlog_cell(c, run), flag]
      end
      Bench.table(["c", "Scenario", "jobs/s", "min–max", "vs unlimited", "Worker CPU %", "Worker CPU-s/1k jobs",
                   "Redis CPU-s/1k jobs", "Redis cmds/job", "Scripts/job", "Script µs/job", "Blocked/job", "Throttled/job",
                   "Backlog run", "Errors"], rows)
    end

    # "10 of 5,000": the backlog jobs that started during the case, of those
    # seeded (empty without a backlog).
    def backlog_cell(c, run)
      backlog = backlog_jobs(c.scenario, c.jobs)
      backlog ? "#{Bench.delimit(run.counts.fetch(:backlog_started, 0))} of #{Bench.delimit(backlog)}" : ""
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
        line += " (the unlimited jobs' drain rate, a throttled backlog beside them)" if FLOW_SCENARIOS.fetch(c.scenario).beside
        c.ok? && base.ok? ? line : "#{line} -- with errors: #{[c, base].reject(&:ok?).map(&:scenario).join(" and ")}"
      end
    end

    # "1.25x"; "n/a" when the baseline measured no time at all (CPU is
    # counted in 10 ms ticks, which a short drain may not see).
    def ratio(value, reference) = reference.positive? ? format("%.2fx", value / reference) : "n/a"

    def csv_row(c)
      run = c.median_run
      backlog = backlog_jobs(c.scenario, c.jobs)
      measured = if run
                   [c.jobs_per_second.round(1), c.rates.min.round(1), c.rates.max.round(1), versus(c)&.round(4),
                    run.seconds.round(4), run.worker_cpu_percent.round(1), run.worker_cpu_per_thousand.round(4),
                    run.server_cpu_per_thousand.round(4), run.commands_per_job.round(4), run.script_calls_per_job.round(4),
                    run.script_usec_per_job.round(2), run.counts.fetch(:blocked, 0).fdiv(run.jobs).round(4),
                    run.counts.fetch(:throttled, 0).fdiv(run.jobs).round(4), backlog,
                    backlog && run.counts.fetch(:backlog_started, 0)]
                 else
                   [*Array.new(13), backlog, nil]
                 end
      [c.scenario, c.concurrency, c.jobs, c.runs.size, c.measured_runs.size, *measured, c.error_count, c.error_text]
    end
  end
end

exit Bench::Flow.main if $PROGRAM_NAME == __FILE__
