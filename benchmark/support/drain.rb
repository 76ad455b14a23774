# frozen_string_literal: true

require_relative "systems"

module Bench
  # Per-run job parameters, calibrated once in the harness process so every
  # system's jobs do identical work.
  Work = Struct.new(:cpu_iterations, :cpu_ms, :io_seconds, keyword_init: true) do
    # Iterations of Bench.spin that take `cpu_seconds` on this host: the
    # median of a few timed runs (the first, untimed one warms up the method
    # cache).
    def self.calibrate(cpu_seconds: 0.003, io_seconds: 0.005, probe: 300_000, runs: 7)
      Bench.spin(probe)
      timings = Array.new(runs) do
        started = Bench.now
        Bench.spin(probe)
        Bench.now - started
      end
      per_iteration = timings.sort[runs / 2] / probe
      iterations = (cpu_seconds / per_iteration).round
      new(cpu_iterations: iterations, cpu_ms: iterations * per_iteration * 1000, io_seconds: io_seconds)
    end
  end

  # A workload of the drains: the twin job of benchmark/jobs.rb and the
  # argument list of job number n. Every list ends with n, which only the
  # stress ledger reads.
  Scenario = Struct.new(:name, :twin, :arguments, :description, keyword_init: true) do
    def argument_lists(jobs, work) = Array.new(jobs) { |n| arguments.call(n, work) }
  end

  IO_50MS_SECONDS = 0.05

  SCENARIOS = [
    Scenario.new(name: "noop", twin: "Noop", arguments: ->(n, _work) { [n] }, description: "Each job does nothing"),
    Scenario.new(name: "process-cpu", twin: "Cpu", arguments: ->(n, work) { [work.cpu_iterations, n] },
                 description: "Each job runs pure Ruby integer arithmetic (Bench.spin) for about 3 ms"),
    Scenario.new(name: "process-io", twin: "Io", arguments: ->(n, work) { [work.io_seconds, n] },
                 description: "Each job sleeps 5 ms (a blocking call that uses no CPU)"),
    Scenario.new(name: "process-mixed", twin: "Mixed", arguments: ->(n, work) { [work.cpu_iterations, work.io_seconds, n] },
                 description: "Jobs alternate: even-numbered ones are process-cpu jobs, odd ones process-io jobs"),
    # The twin of process-io with a wait ten times as long: throughput is
    # set by the sleeps (c / 50 ms), so what differs between systems is
    # what each job costs Redis and the worker, not how fast they run.
    Scenario.new(name: "process-io-50ms", twin: "Io", arguments: ->(n, _work) { [IO_50MS_SECONDS, n] },
                 description: "Each job sleeps 50 ms (I/O-bound: a blocking call that uses no CPU)")
  ].to_h { |s| [s.name, s] }.freeze
  # The scenarios a harness runs when BENCH_SCENARIOS is not set;
  # process-io-50ms only when chosen (a drain is paced by its sleeps).
  DEFAULT_SCENARIOS = %w[noop process-cpu process-io process-mixed].freeze

  # One run of one case (client x scenario x concurrency). `errors` holds
  # only non-zero counts, by kind ("failed", "lost", ...); `failure` says
  # why a run could not be measured at all; `exactly_once` counts the jobs
  # the ledger saw exactly once (stress only).
  # `script_usec`: Redis' own time in scripts (EVALSHA usec) over the same
  # window as `commands`; `redis_usec`: the usec of every command in that
  # window, less the probes' share (CommandStats.usec_delta); `counts`: the
  # system's counters after the stop.
  RunResult = Struct.new(:jobs, :seconds, :worker_cpu_seconds, :server_cpu_seconds, :peak_pss_kb, :allocations,
                         :commands, :script_usec, :redis_usec, :counts, :exactly_once, :errors, :failure, keyword_init: true) do
    def measured? = failure.nil?
    def error_count = errors.values.sum + (measured? ? 0 : 1)
    def jobs_per_second = jobs / seconds
    # Of one core: 200 means two cores busy.
    def worker_cpu_percent = 100.0 * worker_cpu_seconds / seconds
    def worker_cpu_per_thousand = 1000.0 * worker_cpu_seconds / jobs
    def server_cpu_per_thousand = 1000.0 * server_cpu_seconds / jobs
    def peak_pss_mb = peak_pss_kb / 1024.0
    def allocations_per_job = allocations&.fdiv(jobs)
    def commands_per_job = commands.values.sum.fdiv(jobs)
    def script_calls_per_job = commands.fetch("evalsha", 0).fdiv(jobs)
    def script_usec_per_job = script_usec.fdiv(jobs)
    # nil when no script ran.
    def usec_per_script_call = (calls = commands.fetch("evalsha", 0)).positive? ? script_usec.fdiv(calls) : nil
    def redis_usec_per_job = redis_usec.fdiv(jobs)
  end

  # All repetitions of one case. Figures come from the median run (by
  # jobs/s), so every metric in a row belongs to the same run; the spread
  # of jobs/s over the runs is kept as min and max.
  CaseResult = Struct.new(:client, :scenario, :concurrency, :jobs, :runs, keyword_init: true) do
    def measured_runs = runs.select(&:measured?)
    def measured? = !measured_runs.empty?
    def ok? = measured? && error_count.zero?
    def error_count = runs.sum(&:error_count)
    def median_run = measured_runs.sort_by(&:jobs_per_second)[(measured_runs.size - 1) / 2]
    def rates = measured_runs.map(&:jobs_per_second)
    def jobs_per_second = Bench.median(rates)

    # "run 2: 3 lost; run 3: not measured (...)"
    def error_text
      runs.each_with_index.filter_map do |run, i|
        parts = run.errors.map { |kind, n| "#{n} #{kind}" }
        parts << "not measured (#{run.failure.lines.first.strip})" unless run.measured?
        next if parts.empty?

        runs.size > 1 ? "run #{i + 1}: #{parts.join(", ")}" : parts.join(", ")
      end.join("; ")
    end
  end

  # Times a drain and meters the processes over exactly that window. t0 is
  # the first poll that sees fewer than `jobs` waiting (the worker has
  # booted and started fetching), so process boot is not measured; t1 the
  # first poll that sees the system drained. CPU time is read at both, and
  # peak memory sampled in between, over the workers and the servers the
  # system needs.
  class Drain
    POLL_INTERVAL = 0.005

    Metered = Struct.new(:seconds, :worker_cpu_seconds, :server_cpu_seconds, :peak_pss_kb, keyword_init: true)

    def initialize(system, workers, jobs:, timeout:)
      @system = system
      @workers = workers
      @jobs = jobs
      @timeout = timeout
      @pids = {workers: workers.pids, servers: system.server_pids}
    end

    def run
      deadline = Bench.now + @timeout
      started = previous = nil
      loop do
        waiting = @system.waiting
        polled = Bench.now
        started ||= start_metering(polled) if waiting < @jobs
        if waiting.zero? && @system.drained?
          # The whole drain fitted between two polls: the previous poll is
          # the latest moment it can have started.
          started = previous if started == polled && previous
          return finish_metering(polled - started)
        end
        if @workers.exited?
          raise Failure, "worker exited (#{@workers.exit_status}) with #{waiting} of #{@jobs} jobs still waiting"
        end
        raise Failure, "timed out after #{@timeout}s with #{waiting} of #{@jobs} jobs still waiting" if polled > deadline

        previous = polled
        sleep POLL_INTERVAL
      end
    ensure
      @memory&.stop # a drain that failed
    end

    private

    def cpu(which) = @pids.fetch(which).sum { |pid| ProcFacts.cpu_seconds(pid) }

    def start_metering(polled)
      @cpu = [cpu(:workers), cpu(:servers)]
      @memory = PeakMemory.new(@pids.values.flatten).start
      polled
    end

    def finish_metering(seconds)
      raise Failure, "the drain finished within one poll interval; use more jobs to time it" unless seconds.positive?

      peak = @memory.stop
      @memory = nil
      Metered.new(seconds: seconds, worker_cpu_seconds: cpu(:workers) - @cpu[0], server_cpu_seconds: cpu(:servers) - @cpu[1],
                  peak_pss_kb: peak)
    end
  end

  # The run benchmark/comparison.rb and stress.rb share: every client x
  # scenario x concurrency case, `repetitions` times, each run from a clean
  # slate: its own redis-server (and engine server for SolidEngine
  # clients), so no memory, counters or commands carry over.
  #
  #   1. seed every job (workers not running)
  #   2. start the worker process(es); Sidekiq's wait for all to boot
  #   3. Drain times the drain and meters CPU and memory
  #   4. stop the workers (TERM), then count what the system says it did
  #
  # Errors are counted, not raised: jobs failed, lost or run twice by the
  # system's counters, worker processes that did not stop cleanly, and
  # (with a ledger) job numbers missing or seen twice. Repetitions are
  # whole passes, and the clients alternate within each (scenario,
  # concurrency), so drift on a shared host (another tenant, thermal) hits
  # every client of a comparison alike.
  class DrainSuite
    attr_reader :work

    # `catalog`: the scenarios by name, `systems`: the system of a client
    # name (benchmark/flow.rb brings its own of both).
    def initialize(lab, clients:, scenarios:, concurrencies:, repetitions:, jobs:, timeout:, ledger:, catalog: SCENARIOS,
                   systems: Bench.method(:system))
      @lab = lab
      @catalog = catalog
      @systems = systems
      @clients = clients
      @scenarios = scenarios
      # One list for every scenario, or {scenario => list}.
      @concurrencies = concurrencies.is_a?(Hash) ? concurrencies : scenarios.to_h { |s| [s, concurrencies] }
      @repetitions = repetitions
      @jobs = jobs # scenario name -> jobs per case
      @timeout = timeout
      @ledger = ledger
    end

    def run
      @work = Work.calibrate
      pairs = @scenarios.flat_map { |scenario| @concurrencies.fetch(scenario).map { |c| [scenario, c] } }
      puts "#{@clients.size * pairs.size * @repetitions} runs; jobs per case: " \
           "#{@jobs.slice(*@scenarios).map { |s, n| "#{s} #{n}" }.join(", ")}; cpu job = #{@work.cpu_iterations} iterations " \
           "(#{format("%.2f", @work.cpu_ms)} ms here)"
      cases = {}
      @repetitions.times do |repetition|
        pairs.product(@clients).each do |(scenario, concurrency), client|
          print "#{"[#{repetition + 1}/#{@repetitions}] " if @repetitions > 1}#{scenario} c=#{concurrency} #{client}: "
          jobs = @jobs.fetch(scenario)
          run = run_case(@systems.call(client), @catalog.fetch(scenario), concurrency, jobs)
          puts summary(run)
          warn "  #{run.failure.gsub("\n", "\n  ")}" unless run.measured?
          (cases[[scenario, concurrency, client]] ||= CaseResult.new(client: client, scenario: scenario, concurrency: concurrency,
                                                                     jobs: jobs, runs: [])).runs << run
        end
      end
      cases.values
    end

    private

    def run_case(system, scenario, concurrency, jobs)
      result = RunResult.new(jobs: jobs, errors: {})
      (lab = case_lab).start
      system.prepare(lab)
      seed(system, scenario, jobs)
      system.own_commands.clear # only those after `before` are in the delta
      before = lab.redis.info("commandstats")
      workers = system.start_workers(concurrency, env: worker_env(lab))
      system.release(workers, @timeout)
      metered = Drain.new(system, workers, jobs: jobs, timeout: @timeout).run
      after = lab.redis.info("commandstats")
      # The INFO for `before` is itself counted here.
      own = system.own_commands.merge("info" => 1) { |_, a, b| a + b }
      result.commands = CommandStats.delta(CommandStats.calls(before), CommandStats.calls(after), own)
      result.script_usec = CommandStats.usec(after, "evalsha") - CommandStats.usec(before, "evalsha")
      result.redis_usec = CommandStats.usec_delta(before, after, own)
      result.seconds, result.worker_cpu_seconds, result.server_cpu_seconds, result.peak_pss_kb = metered.to_a
      count_errors(result, system, workers, lab)
      result
    rescue Failure, ProcessError, SolidJobs::Error, Redis::BaseError, SystemCallError => e
      workers&.stop # so its log is complete
      result.failure = "#{e.class}: #{e.message}"
      result.failure += "\nworker: #{workers.description}\nworker output (last lines):\n#{workers.log_tail}" if workers
      result
    ensure
      workers&.stop
      system.cleanup
      lab&.redis&.close
      lab&.redis_server&.cleanup
    end

    # Every job of the case, written before the workers start (benchmark/flow.rb
    # seeds a backlog beside them).
    def seed(system, scenario, jobs)
      system.seed(system.job(scenario.twin), scenario.argument_lists(jobs, @work))
      raise Failure, "seeding left #{system.seeded} jobs waiting, expected #{jobs}" unless system.seeded == jobs
    end

    # Short on purpose: the engine's Unix socket lives below it, and socket
    # paths are limited to about 100 bytes.
    def case_lab
      dir = File.join(@lab.dir, (@cases = (@cases || 0) + 1).to_s)
      FileUtils.mkdir_p([File.join(dir, "stats"), File.join(dir, "ledger")])
      Lab.new(children: @lab.children, redis_server: RedisServer.new(children: @lab.children), dir: dir)
    end

    # Where workers write their allocation counts and ledger.
    def worker_env(lab)
      env = {"BENCH_STATS_DIR" => File.join(lab.dir, "stats")}
      env["BENCH_LEDGER_DIR"] = File.join(lab.dir, "ledger") if @ledger
      env
    end

    # Counters are complete only once the workers have stopped (Sidekiq
    # writes its own at exit). A worker that exited without writing its
    # allocations skipped its exit hooks (KILL, or Kernel.exit! after the
    # shutdown timeout): an unclean stop even if its status was 0.
    def count_errors(result, system, workers, lab)
      stopped_badly = workers.stop
      allocations = WorkerStats.read(File.join(lab.dir, "stats"))
      result.allocations = allocations.values.sum if allocations.size == workers.size
      counts = result.counts = system.final_counts
      errors = {"failed" => counts[:failed], "lost" => result.jobs - counts[:processed],
                "extra completions" => counts[:processed] - result.jobs,
                "unclean stops" => [stopped_badly, workers.size - allocations.size].max}
      errors.merge!(ledger_errors(result, lab)) if @ledger
      if (problem = system.finish)
        warn "  #{problem.gsub("\n", "\n  ")}"
        errors["server stop problems"] = 1
      end
      result.errors = errors.select { |_, n| n.positive? }
    end

    def ledger_errors(result, lab)
      tally = JobLedger.tally(File.join(lab.dir, "ledger"), result.jobs)
      result.exactly_once = tally.exactly_once
      {"never ran" => tally.missing, "ran twice" => tally.duplicates, "unknown job numbers" => tally.unexpected}
    end

    def summary(run)
      return "NOT MEASURED" unless run.measured?

      line = format("%.0f jobs/s (%.3f s), worker CPU %.0f%% (%.2f CPU-s/1k jobs), peak PSS %.1f MB, %s allocs/job, " \
                    "%.2f Redis cmds/job",
                    run.jobs_per_second, run.seconds, run.worker_cpu_percent, run.worker_cpu_per_thousand, run.peak_pss_mb,
                    run.allocations_per_job ? format("%.1f", run.allocations_per_job) : "n/a", run.commands_per_job)
      run.errors.empty? ? line : "#{line} -- ERRORS: #{run.errors.map { |kind, n| "#{n} #{kind}" }.join(", ")}"
    end
  end
end

module Bench
  # The base of comparison.rb and stress.rb: the settings both take, and
  # the DrainSuite run. A subclass gives DEFAULTS and SMOKE ({clients:,
  # scenarios:, concurrencies:, jobs: {scenario => jobs}, timeout:, and
  # optionally repetitions:}), LEDGER,
  # and `report(cases)`.
  class DrainHarness < Harness
    def initialize(settings)
      super
      defaults = @smoke ? self.class::SMOKE : self.class::DEFAULTS
      @clients = settings.choices("BENCH_CLIENTS", client_names, defaults.fetch(:clients))
      @scenarios = settings.choices("BENCH_SCENARIOS", catalog.keys, defaults.fetch(:scenarios))
      @concurrencies = settings.per_kind_integers("BENCH_CONCURRENCY", @scenarios, defaults.fetch(:concurrencies))
      @repetitions = settings.integer("BENCH_REPETITIONS", defaults.fetch(:repetitions, 1))
      @jobs = settings.per_kind("BENCH_JOBS", defaults.fetch(:jobs))
      @timeout = settings.integer("BENCH_CASE_TIMEOUT", defaults.fetch(:timeout))
    end

    private

    # The scenarios and clients BENCH_SCENARIOS and BENCH_CLIENTS choose
    # from, and the system of a client name.
    def catalog = SCENARIOS
    def client_names = ClientNames
    def system_of(name) = Bench.system(name)
    def suite_class = DrainSuite

    def measure
      @suite = suite_class.new(@lab, clients: @clients, scenarios: @scenarios, concurrencies: @concurrencies,
                                     repetitions: @repetitions, jobs: @jobs, timeout: @timeout, ledger: self.class::LEDGER,
                                     catalog: catalog, systems: method(:system_of))
      cases = @suite.run
      report(cases)
      cases.all?(&:ok?)
    end

    def header = super(load_at_end: true)

    def sizes_line
      "Jobs per case: #{@jobs.slice(*@scenarios).map { |s, n| "#{s} #{n}" }.join(", ")}; process-cpu job = " \
        "#{@suite.work.cpu_iterations} iterations of Bench.spin (#{format("%.2f", @suite.work.cpu_ms)} ms when calibrated), " \
        "process-io job = sleep #{(@suite.work.io_seconds * 1000).round} ms#{", process-io-50ms job = sleep 50 ms" if
        @scenarios.include?("process-io-50ms")}. #{@repetitions} run(s) per case. Run at #{run_time}."
    end
  end
end
