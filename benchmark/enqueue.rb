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
#   BENCH_ENQUEUE_CONCURRENCY (1,2,4,8)  producer threads per case, a list
#   BENCH_ENQUEUE_SINGLE_JOBS (20000)    jobs per single-enqueue case
#   BENCH_ENQUEUE_BULK_JOBS (200000)     jobs per bulk case
#   BENCH_ENQUEUE_BATCH (100)            jobs per enqueue_many / push_bulk call
#   BENCH_PING_COUNT (20000)             PINGs timed for the round-trip floor,
#                                        through redis-rb and over a bare socket
#   BENCH_REPEAT (3)                     runs per case; the median is reported
#   BENCH_SMOKE=1                        200 single / 2000 bulk jobs, producers
#                                        1 and 2, one run; writes no results
#                                        unless BENCH_OUTPUT_DIR is set
#   BENCH_OUTPUT_DIR (benchmark/results) where enqueue.md and enqueue.csv go
#
# The same calls an application makes: SolidJobs `Task.enqueue(i)` and
# `Task.enqueue_many(lists)`; Sidekiq `Sidekiq::Client.push` (what
# perform_async calls) and `Sidekiq::Client.push_bulk`, each job with the
# argument list [i]. Sidekiq's client takes connections from its pool, sized
# to the largest producer count, so no thread waits for a connection; the
# SolidJobs client keeps a connection per concurrent caller (up to 32).
# Exit status is non-zero only when a case could not be measured; missing
# a target is a result, not an error.

$LOAD_PATH.unshift(File.expand_path("../lib", __dir__))
require "solid_jobs"
require "sidekiq"
require "redis"
require "socket"
require_relative "support/harness"
require_relative "support/command_stats"
require_relative "support/producer_threads"
require_relative "support/enqueue_report"
require_relative "enqueue_idle_jobs"

module Bench
  EnqueueSettings = Struct.new(:concurrencies, :single_jobs, :bulk_jobs, :batch, :ping_count, :repeat, :output_dir,
                               keyword_init: true)

  class EnqueueBenchmark < Harness
    ROOT = File.expand_path("..", __dir__)
    DEFAULT_OUTPUT_DIR = File.join(ROOT, "benchmark/results")
    MODES = %i[single bulk].freeze
    # Warm-up pushes per system before anything is timed: loads the Lua
    # scripts and opens every pooled connection the largest case will use.
    WARM_UP_BATCHES = 4

    # What differs between the two systems, in one place. A batch is an
    # Array of argument lists; a single push takes a batch of one.
    SYSTEMS = {
      sidekiq: {
        list: "queue:bench",
        single: ->(batch) { Sidekiq::Client.push("class" => NoopSidekiqJob, "args" => batch.first) },
        bulk: ->(batch) { Sidekiq::Client.push_bulk("class" => NoopSidekiqJob, "args" => batch) }
      },
      solid_jobs: {
        list: "solid_jobs:channel:bench",
        single: ->(batch) { NoopSolidTask.enqueue(*batch.first) },
        bulk: ->(batch) { NoopSolidTask.enqueue_many(batch) }
      }
    }.freeze

    def self.settings(env)
      smoke = smoke?(env)
      EnqueueSettings.new(
        concurrencies: integer_list(env, "BENCH_ENQUEUE_CONCURRENCY", smoke ? [1, 2] : [1, 2, 4, 8], sort: true),
        single_jobs: Bench.positive_integer(env, "BENCH_ENQUEUE_SINGLE_JOBS", smoke ? 200 : 20_000),
        bulk_jobs: Bench.positive_integer(env, "BENCH_ENQUEUE_BULK_JOBS", smoke ? 2_000 : 200_000),
        batch: Bench.positive_integer(env, "BENCH_ENQUEUE_BATCH", 100),
        ping_count: Bench.positive_integer(env, "BENCH_PING_COUNT", smoke ? 200 : 20_000),
        repeat: Bench.positive_integer(env, "BENCH_REPEAT", smoke ? 1 : 3),
        output_dir: output_setting(env, "BENCH_OUTPUT_DIR", DEFAULT_OUTPUT_DIR, smoke: smoke)
      )
    end

    def run
      open_lab
      configure_clients
      puts results_header, sizes_line
      warm_up
      ping_rates = measure_ping
      puts "PING at 1 producer: " + ping_rates.map { |how, rate| format("%.0f round trips/s (%s)", rate, how) }.join(", ")
      cases = MODES.product(@settings.concurrencies).flat_map { |mode, concurrency| measure_pair(mode, concurrency) }
      publish(EnqueueReport.new(cases, batch: @settings.batch, ping_rates: ping_rates))
      cases.all?(&:ok?) ? 0 : 1
    ensure
      @lab&.close
    end

    private

    # The pool is as large as the largest producer count, so Sidekiq is
    # never throttled by waiting for a connection (its default is 5).
    def configure_clients
      Sidekiq.configure_client { |config| config.redis = {url: @lab.url, size: pool_size, pool_timeout: 5} }
      SolidJobs.configure { |config| config.redis_url = @lab.url }
    end

    def pool_size = @settings.concurrencies.max

    def sizes_line
      "Sizes: #{@settings.single_jobs} single / #{@settings.bulk_jobs} bulk jobs per case, batch #{@settings.batch}, " \
        "producers #{@settings.concurrencies.join(",")}, median of #{@settings.repeat} run(s); " \
        "Sidekiq client pool size #{pool_size}"
    end

    def warm_up
      SYSTEMS.each_key do |system|
        MODES.each do |mode|
          shares = Array.new(pool_size) { Array.new(WARM_UP_BATCHES) { Array.new(@settings.batch) { [0] } } }
          outcome = ProducerThreads.new(shares).run(&SYSTEMS.fetch(system).fetch(mode))
          raise Failure, "warm-up of #{system} #{mode} failed: #{outcome.first_error.full_message}" if outcome.first_error
        end
      end
      @lab.redis.flushall
    end

    # The round-trip floor: PINGs one at a time from this process, as a
    # single producer sends its enqueues. Through redis-rb (what Sidekiq's
    # client pays per call) and over a bare socket (little Ruby in the way,
    # so closer to what the native SolidJobs client pays).
    def measure_ping
      {"redis-rb" => rate_of(@settings.ping_count) { @lab.redis.ping },
       "raw socket" => raw_ping_rate}
    end

    def raw_ping_rate
      socket = TCPSocket.new("127.0.0.1", @lab.redis_server.port)
      socket.setsockopt(Socket::IPPROTO_TCP, Socket::TCP_NODELAY, 1)
      rate_of(@settings.ping_count) do
        socket.write("PING\r\n")
        reply = socket.gets
        raise Failure, "unexpected PING reply #{reply.inspect}" unless reply == "+PONG\r\n"
      end
    ensure
      socket&.close
    end

    # Calls per second of the block, after one untimed call.
    def rate_of(count)
      yield
      started = Bench.now
      count.times { yield }
      count / (Bench.now - started)
    end

    # The two systems' runs alternate, so a burst of load from other work
    # on the host hits both rather than one.
    def measure_pair(mode, concurrency)
      runs = Hash.new { |h, k| h[k] = [] }
      @settings.repeat.times do
        SYSTEMS.each_key { |system| runs[system] << measure_once(mode, concurrency, system) }
      end
      runs.values.map { |list| EnqueueCase.new(list) }
    end

    def measure_once(mode, concurrency, system)
      jobs = mode == :single ? @settings.single_jobs : @settings.bulk_jobs
      run = EnqueueRun.new(mode: mode, concurrency: concurrency, system: system, jobs: jobs)
      print "#{system} #{mode} producers=#{concurrency}: "
      @lab.redis.flushall
      shares = shares(jobs, mode == :single ? 1 : @settings.batch, concurrency)
      before = CommandStats.snapshot(@lab.redis)
      cpu_before = cpu_seconds
      outcome = ProducerThreads.new(shares).run(&SYSTEMS.fetch(system).fetch(mode))
      cpu_after = cpu_seconds
      after = CommandStats.snapshot(@lab.redis)
      # The INFOs for `before` and the first CPU reading are counted in `after`.
      run.commands = CommandStats.delta(before, after, {"info" => 2})
      run.producer_cpu, run.redis_cpu = cpu_after.zip(cpu_before).map { |a, b| a - b }
      run.seconds = outcome.seconds
      run.error = check(outcome, system, jobs)
      puts run.ok? ? format("%.0f jobs/s (%.3f s)", run.jobs_per_second, run.seconds) : "ERROR #{run.error}"
      run
    end

    # [this process, redis-server] CPU seconds so far; redis-server reports
    # its own (INFO cpu, microseconds), finer than /proc's clock ticks.
    def cpu_seconds
      redis = @lab.redis.info("cpu")
      [Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID), Float(redis["used_cpu_user"]) + Float(redis["used_cpu_sys"])]
    end

    # Job i has the argument list [i]; batches are dealt out round-robin, so
    # every thread has the same amount of work (within one batch).
    def shares(jobs, batch, concurrency)
      batches = (0...jobs).each_slice(batch).map { |slice| slice.map { |i| [i] } }
      batches.each_with_index.group_by { |_, i| i % concurrency }.values.map { |pairs| pairs.map(&:first) }
    end

    # nil when every job was pushed and is in the queue; otherwise what went
    # wrong, so the run is reported as an error rather than a rate.
    def check(outcome, system, jobs)
      queued = @lab.redis.llen(SYSTEMS.fetch(system).fetch(:list))
      return nil if outcome.failed.zero? && outcome.pushed == jobs && queued == jobs

      problem = "#{outcome.failed} of #{jobs} jobs failed to push, #{queued} queued (expected #{outcome.pushed})"
      outcome.first_error ? "#{problem}; first error: #{outcome.first_error.class}: #{outcome.first_error.message}" : problem
    end

    def publish(report)
      body = [report.table, "", "Round-trip floor:", *report.floor_lines, "",
              "CPU during each case's median run (% of one core; #{Environment.nproc} cores here):", "", report.cpu_table, "",
              "Targets:", *report.target_lines.map { |l| "- #{l}" }]
      body = with_errors(body, report)
      puts "", body
      return unless @settings.output_dir

      markdown = "# Enqueue: SolidJobs vs Sidekiq\n\n#{results_header}\n\n#{sizes_line}. " \
                 "#{method_note}\n\n#{body}\n"
      write_results(@settings.output_dir, "enqueue", markdown, report)
    end

    def method_note
      "Producer threads in one process push to a private redis-server (no persistence); no worker runs. Each run " \
        "starts from FLUSHALL and is timed from releasing the already-started threads to the last one finishing; " \
        "the queue length is then checked against the jobs pushed. SolidJobs: `Task.enqueue(i)` / " \
        "`Task.enqueue_many`; Sidekiq: `Sidekiq::Client.push` / `push_bulk`. Redis commands per job count those run " \
        "inside Lua scripts too. Run at #{Time.now.utc.strftime("%Y-%m-%d %H:%M UTC")}; generated by " \
        "`bundle exec rake benchmark:enqueue`."
    end
  end
end

exit Bench::EnqueueBenchmark.main(ENV) if $PROGRAM_NAME == __FILE__
