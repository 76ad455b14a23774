# frozen_string_literal: true

# Enqueue rate of SolidJobs against Sidekiq 6.4.1, single and bulk, with
# 1..8 producer threads in this process, against one private redis-server.
# No worker runs: the jobs stay queued, and each case checks that the queue
# holds exactly what the producers report pushed.
#
#   bundle exec rake benchmark:enqueue
#   BENCH_SMOKE=1 bundle exec rake benchmark:enqueue   # seconds, for tests
#
# Environment (defaults in parentheses):
#   BENCH_CONCURRENCY   producer threads per case, a list (1,2,4,8)
#   BENCH_JOBS          single=N (20000) and bulk=N (200000) jobs per case
#   BENCH_BATCH         jobs per enqueue_many / push_bulk call (100)
#   BENCH_PING_COUNT    PINGs timed for the round-trip floor, through
#                       redis-rb and over a bare socket (20000)
#   BENCH_REPETITIONS   runs per case; the median is reported (3)
#   BENCH_SMOKE=1       200 single / 2000 bulk jobs, producers 1 and 2, one run
#   BENCH_OUTPUT_DIR    where enqueue.{md,csv} go (benchmark/results; nowhere in a smoke run)
#
# The same calls an application makes: SolidJobs `Task.enqueue(i)` and
# `Task.enqueue_many(lists)`; Sidekiq `Sidekiq::Client.push` (what
# perform_async calls) and `Sidekiq::Client.push_bulk`, each job with the
# argument list [i]. Sidekiq's client takes connections from its pool, sized
# to the largest producer count, so no thread waits for a connection; the
# SolidJobs client keeps a connection per concurrent caller (up to 32).
#
# Unique vs plain: the same SolidJobs cases for a unique task
# (`unique: {by: :arguments, while: :queued}`, every job a distinct key, so
# each takes a lock: docs/unique.md), as the "solid-jobs-unique" system.

require_relative "support/systems"
require "sidekiq"
require "socket"
require_relative "jobs"

# The unique twin of SolidNoop: only producers use it (no worker runs here).
class SolidUniqueNoop
  include SolidJobs::Task
  task_options channel: "bench", unique: {by: :arguments, while: :queued}

  def execute_task(n) = n
end

module Bench
  class Enqueue < Harness
    CLIENTS = %w[sidekiq solid-jobs].freeze
    # Measured after CLIENTS, against solid-jobs' plain task.
    UNIQUE = "solid-jobs-unique"
    MODES = %w[single bulk].freeze
    # Warm-up pushes per system before anything is timed: loads the Lua
    # scripts and opens every pooled connection the largest case will use.
    WARM_UP_BATCHES = 4
    TARGETS = {"single" => 2.0, "bulk" => 3.0}.freeze
    SIDEKIQ_CALL = {"single" => "push", "bulk" => "push_bulk"}.freeze
    CSV_HEADER = %w[mode batch concurrency system jobs_per_case runs median_jobs_per_s min_jobs_per_s max_jobs_per_s
                    redis_commands_per_job ratio_vs_sidekiq producer_cpu_percent redis_cpu_percent error].freeze

    # One timed run: `commands` are the Redis calls it caused;
    # `producer_cpu` and `redis_cpu` the CPU seconds this process and
    # redis-server used meanwhile, which show which side limits a rate that
    # stops growing with producers.
    Run = Struct.new(:jobs, :seconds, :commands, :producer_cpu, :redis_cpu, :error, keyword_init: true) do
      def ok? = error.nil?
      def jobs_per_second = jobs / seconds
      def commands_per_job = commands.values.sum.fdiv(jobs)
      def producer_cpu_percent = 100.0 * producer_cpu / seconds
      def redis_cpu_percent = 100.0 * redis_cpu / seconds
    end

    # The repetitions of one case, summarised by their median: on a shared
    # host one slow or fast outlier should move neither rate nor ratio.
    Case = Struct.new(:mode, :concurrency, :client, :runs, keyword_init: true) do
      def ok? = runs.all?(&:ok?)
      def error = runs.find { |r| !r.ok? }&.error
      def jobs = runs.first.jobs
      def rates = runs.map(&:jobs_per_second).sort
      def jobs_per_second = Bench.median(rates)
      def commands_per_job = Bench.median(runs.map(&:commands_per_job))
      # The run at the middle of the rates, for figures not averaged.
      def median_run = runs.sort_by(&:jobs_per_second)[(runs.size - 1) / 2]
      def label = {"sidekiq" => "Sidekiq", UNIQUE => "SolidJobs unique"}.fetch(client, "SolidJobs")
    end

    def initialize(settings)
      super
      @concurrencies = settings.integers("BENCH_CONCURRENCY", @smoke ? [1, 2] : [1, 2, 4, 8]).sort
      @jobs = settings.per_kind("BENCH_JOBS",
                                @smoke ? {"single" => 200, "bulk" => 2000} : {"single" => 20_000, "bulk" => 200_000})
      @batch = settings.integer("BENCH_BATCH", 100)
      @ping_count = settings.integer("BENCH_PING_COUNT", @smoke ? 200 : 20_000)
      @repetitions = settings.integer("BENCH_REPETITIONS", @smoke ? 1 : 3)
    end

    private

    def measure
      @systems = CLIENTS.to_h { |name| [name, Bench.system(name).tap { |s| s.prepare(@lab) }] }
      # The pool is as large as the largest producer count, so Sidekiq is
      # never throttled by waiting for a connection (its default is 5).
      Sidekiq.configure_client { |config| config.redis = {url: @lab.url, size: @concurrencies.max, pool_timeout: 5} }
      puts sizes_line
      warm_up
      @ping_rates = {"redis-rb" => rate_of { @lab.redis.ping }, "raw socket" => raw_ping_rate}
      puts "PING at 1 producer: #{@ping_rates.map { |how, rate| format("%.0f round trips/s (%s)", rate, how) }.join(", ")}"
      @cases = MODES.product(@concurrencies).flat_map { |mode, concurrency| measure_pair(mode, concurrency) }
      @cases += MODES.product(@concurrencies).map do |mode, concurrency|
        Case.new(mode: mode, concurrency: concurrency, client: UNIQUE,
                 runs: Array.new(@repetitions) { measure_once(mode, concurrency, UNIQUE) })
      end
      report
      @cases.all?(&:ok?)
    end

    def sizes_line
      "Sizes: #{@jobs["single"]} single / #{@jobs["bulk"]} bulk jobs per case, batch #{@batch}, producers " \
        "#{@concurrencies.join(",")}, median of #{@repetitions} run(s); Sidekiq client pool size #{@concurrencies.max}"
    end

    # A batch is an Array of argument lists; a single push takes a batch of one.
    def push(client, mode)
      system = @systems.fetch(client == UNIQUE ? "solid-jobs" : client)
      job = client == UNIQUE ? SolidUniqueNoop : system.job("Noop")
      mode == "single" ? ->(batch) { system.enqueue(job, *batch.first) } : ->(batch) { system.enqueue_many(job, batch) }
    end

    def warm_up
      [*CLIENTS, UNIQUE].product(MODES).each do |client, mode|
        shares = Array.new(@concurrencies.max) { Array.new(WARM_UP_BATCHES) { Array.new(@batch) { [0] } } }
        _, _, failed, error = produce(shares, push(client, mode))
        raise Failure, "warm-up of #{client} #{mode} failed: #{error.full_message}" if failed.positive?
      end
      @lab.redis.flushall
    end

    # The round-trip floor: PINGs one at a time from this process, as a
    # single producer sends its enqueues. Through redis-rb (what Sidekiq's
    # client pays per call) and over a bare socket (little Ruby in the way,
    # so closer to what the native SolidJobs client pays).
    def raw_ping_rate
      socket = TCPSocket.new("127.0.0.1", @lab.redis_server.port)
      socket.setsockopt(Socket::IPPROTO_TCP, Socket::TCP_NODELAY, 1)
      rate_of do
        socket.write("PING\r\n")
        reply = socket.gets
        raise Failure, "unexpected PING reply #{reply.inspect}" unless reply == "+PONG\r\n"
      end
    ensure
      socket&.close
    end

    # Calls per second of the block, after one untimed call.
    def rate_of(&block)
      yield
      started = Bench.now
      @ping_count.times(&block)
      @ping_count / (Bench.now - started)
    end

    # The two systems' runs alternate, so a burst of load from other work
    # on the host hits both rather than one.
    def measure_pair(mode, concurrency)
      runs = Array.new(@repetitions) { CLIENTS.map { |client| measure_once(mode, concurrency, client) } }.transpose
      CLIENTS.zip(runs).map { |client, list| Case.new(mode: mode, concurrency: concurrency, client: client, runs: list) }
    end

    def measure_once(mode, concurrency, client)
      jobs = @jobs.fetch(mode)
      run = Run.new(jobs: jobs)
      print "#{client} #{mode} producers=#{concurrency}: "
      @lab.redis.flushall
      # Job i has the argument list [i]; batches are dealt out round-robin,
      # so every thread has the same amount of work (within one batch).
      batches = (0...jobs).each_slice(mode == "single" ? 1 : @batch).map { |slice| slice.map { |i| [i] } }
      shares = batches.each_with_index.group_by { |_, i| i % concurrency }.values.map { |pairs| pairs.map(&:first) }
      before = CommandStats.snapshot(@lab.redis)
      cpu_before = cpu_seconds
      run.seconds, pushed, failed, error = produce(shares, push(client, mode))
      cpu_after = cpu_seconds
      # The INFOs for `before` and the first CPU reading are counted here.
      run.commands = CommandStats.delta(before, CommandStats.snapshot(@lab.redis), {"info" => 2})
      run.producer_cpu, run.redis_cpu = cpu_after.zip(cpu_before).map { |a, b| a - b }
      queued = @systems.fetch(client == UNIQUE ? "solid-jobs" : client).waiting
      unless failed.zero? && pushed == jobs && queued == jobs
        run.error = "#{failed} of #{jobs} jobs failed to push, #{queued} queued (expected #{pushed})"
        run.error += "; first error: #{error.class}: #{error.message}" if error
      end
      puts run.ok? ? format("%.0f jobs/s (%.3f s)", run.jobs_per_second, run.seconds) : "ERROR #{run.error}"
      run
    end

    # [this process, redis-server] CPU seconds so far; redis-server reports
    # its own (INFO cpu, microseconds), finer than /proc's clock ticks.
    def cpu_seconds
      redis = @lab.redis.info("cpu")
      [Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID), Float(redis["used_cpu_user"]) + Float(redis["used_cpu_sys"])]
    end

    # One producer thread per share (an Array of batches), timed together
    # from the moment all are started and waiting at a gate to the moment
    # the last one finished, so thread creation is outside the window. A
    # push that raises is counted (its jobs as failed) and the thread goes
    # on: an error rate is a result. [seconds, pushed, failed, first error]
    def produce(shares, push)
      ready = Queue.new
      gate = Queue.new
      threads = shares.map do |share|
        Thread.new do
          ready << true
          gate.pop
          share.each_with_object([0, 0, nil]) do |batch, tally|
            push.call(batch)
            tally[0] += batch.size
          rescue StandardError => e
            tally[1] += batch.size
            tally[2] ||= e
          end
        end
      end
      shares.size.times { ready.pop }
      started = Bench.now
      shares.size.times { gate << true }
      tallies = threads.map(&:value)
      [Bench.now - started, tallies.sum { |t| t[0] }, tallies.sum { |t| t[1] }, tallies.filter_map { |t| t[2] }.first]
    end

    def find(client, mode, concurrency) = @cases.find { |c| c.client == client && c.mode == mode && c.concurrency == concurrency }
    def batch_of(mode) = mode == "bulk" ? @batch : 1
    def rate(c) = c.nil? ? "n/a" : (c.ok? ? Bench.delimit(c.jobs_per_second) : "error")
    def per_job(c) = c&.ok? ? format("%.2f", c.commands_per_job) : "n/a"
    def times(value) = value ? format("%.2fx", value) : "n/a"

    # This case's rate over the same system and mode at one producer.
    def scaling(c) = c && Bench.ratio(c, find(c.client, c.mode, 1))

    def report
      cases = MODES.product(@concurrencies)
      rows = cases.map do |mode, concurrency|
        sidekiq, solid = CLIENTS.map { |client| find(client, mode, concurrency) }
        [mode, batch_of(mode), concurrency, Bench.delimit((sidekiq || solid).jobs), rate(sidekiq), rate(solid),
         times(Bench.ratio(solid, sidekiq)), times(scaling(sidekiq)), times(scaling(solid)), per_job(sidekiq), per_job(solid)]
      end
      table = Bench.table(["Mode", "Batch", "Producers", "Jobs/case", "Sidekiq jobs/s", "SolidJobs jobs/s", "SolidJobs/Sidekiq",
                           "Sidekiq vs 1 producer", "SolidJobs vs 1 producer", "Sidekiq cmds/job", "SolidJobs cmds/job"], rows)
      targets = cases.map do |mode, concurrency|
        Bench.ratio_target(Bench.ratio(find("solid-jobs", mode, concurrency), find("sidekiq", mode, concurrency)),
                           TARGETS.fetch(mode),
                           "#{mode} enqueue#{mode == "bulk" ? " (batch #{@batch})" : ""} at #{concurrency} producer(s): " \
                           "SolidJobs/Sidekiq #{SIDEKIQ_CALL.fetch(mode)}")
      end
      body = ["Round-trip floor:", *floor_lines, "", *unique_lines, "",
              "CPU during each case's median run (% of one core; #{Host.nproc} cores here):",
              "", cpu_table, "", "Targets:", *targets.map { |l| "- #{l}" }]
      errors = @cases.reject(&:ok?).map { |c| "- #{c.label} #{c.mode} at #{c.concurrency}: #{c.error}" }
      publish("enqueue", title: "Enqueue: SolidJobs vs Sidekiq", body: with_errors([table, "", *body], errors), csv: csv,
                         intro: "#{sizes_line}. #{METHOD} Run at #{run_time}; generated by `bundle exec rake benchmark:enqueue`.")
    end

    # A unique task against the plain one (docs/unique.md): every job takes a
    # lock, none is a duplicate.
    def unique_lines
      rows = MODES.product(@concurrencies).map do |mode, concurrency|
        plain, unique = ["solid-jobs", UNIQUE].map { |client| find(client, mode, concurrency) }
        [mode, batch_of(mode), concurrency, rate(plain), rate(unique), times(Bench.ratio(unique, plain)), per_job(plain),
         per_job(unique)]
      end
      ["Unique vs plain SolidJobs task (`unique: {by: :arguments, while: :queued}`, every job its own key):", "",
       Bench.table(["Mode", "Batch", "Producers", "Plain jobs/s", "Unique jobs/s", "Unique/plain", "Plain cmds/job",
                    "Unique cmds/job"], rows)]
    end

    METHOD = "Producer threads in one process push to a private redis-server (no persistence); no worker runs. Each run " \
             "starts from FLUSHALL and is timed from releasing the already-started threads to the last one finishing; " \
             "the queue length is then checked against the jobs pushed. SolidJobs: `Task.enqueue(i)` / " \
             "`Task.enqueue_many`; Sidekiq: `Sidekiq::Client.push` / `push_bulk`. Redis commands per job count those run " \
             "inside Lua scripts too."

    # How close single enqueue at one producer comes to one round trip per
    # job. The redis-rb PING includes the Ruby client's own cost per call,
    # which the native SolidJobs client does not pay, so SolidJobs can pass
    # it; the raw-socket PING is the closer bound.
    def floor_lines
      lines = @ping_rates.map do |how, rate|
        "- PING round trips at 1 producer (#{how}, one connection): #{Bench.delimit(rate)}/s"
      end
      CLIENTS.filter_map { |client| find(client, "single", 1) }.select(&:ok?).each do |c|
        shares = @ping_rates.map { |how, rate| format("%.0f%% of the %s PING rate", 100.0 * c.jobs_per_second / rate, how) }
        lines << "- #{c.label} single enqueue at 1 producer: #{Bench.delimit(c.jobs_per_second)} jobs/s = #{shares.join(", ")}"
      end
      lines
    end

    # Where the time of each case's median run went: CPU of this process
    # (the producers and the client libraries) and of redis-server, each as
    # a share of one core. Either near 100% means that side is the limit;
    # together near the core count means the host is.
    def cpu_table
      rows = @cases.select(&:ok?).map do |c|
        run = c.median_run
        [c.mode, c.concurrency, c.label, Bench.delimit(run.jobs_per_second), format("%.0f", run.producer_cpu_percent),
         format("%.0f", run.redis_cpu_percent)]
      end
      Bench.table(["Mode", "Producers", "System", "Jobs/s (median run)", "Producer process CPU %", "redis-server CPU %"], rows)
    end

    def csv
      rows = @cases.map do |c|
        run = c.ok? ? c.median_run : nil
        other = c.client == "solid-jobs" ? find("sidekiq", c.mode, c.concurrency) : nil
        [c.mode, batch_of(c.mode), c.concurrency, c.client, c.jobs, c.runs.size, run && c.jobs_per_second.round,
         run && c.rates.first.round, run && c.rates.last.round, run && c.commands_per_job.round(3),
         Bench.ratio(c, other)&.round(3), run&.producer_cpu_percent&.round(1), run&.redis_cpu_percent&.round(1), c.error]
      end
      pings = @ping_rates.map do |how, rate|
        ["ping", 1, 1, "PING via #{how}", nil, 1, rate.round, nil, nil, 1, nil, nil, nil, nil]
      end
      Bench.csv(CSV_HEADER, rows + pings)
    end
  end
end

exit Bench::Enqueue.main if $PROGRAM_NAME == __FILE__
