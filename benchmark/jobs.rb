# frozen_string_literal: true

# The jobs of every benchmark but hybrid.rb, loaded three ways:
#
#   * by `sidekiq -r ./benchmark/jobs.rb`           -> Sidekiq workers only
#   * by `solid-jobs --require ./benchmark/jobs.rb` -> SolidJobs tasks only
#   * by a harness (both libraries loaded)          -> both, to enqueue
#
# The solid-jobs CLI loads solid_jobs before this file, so a process without
# SolidJobs::Task is the Sidekiq one; each worker process then loads only
# its own library and the comparison is not skewed by the other's code.
# (SolidJobs itself exists in every process under Bundler: the gemspec
# loads solid_jobs/version.)
#
# Every Sidekiq worker and its SolidJobs twin (SidekiqNoop / SolidNoop...)
# call the same body. Nothing here touches mutable shared state, so it runs
# in worker Ractors unchanged.
#
# What a worker records for the harness, each half of the protocol beside
# the other, reaches it through the environment the harness sets:
#   BENCH_STATS_DIR   allocations of the process (WorkerStats)
#   BENCH_LEDGER_DIR  every job number it completed (JobLedger, stress)
#   BENCH_START_LOG   when each job started (StartLog, latency and soak)
#   BENCH_FLOW_STARTS every throttled backlog job it started (FlowStarts, flow)
#   BENCH_ENGINE_URL  work on this SolidEngine server instead of Redis
#   BENCH_RECURRING   run this many recurring schedules (idle.rb)
#
# The Solid-only tasks of benchmark/flow.rb (SolidFlow*) are at the end.

require "set"
require "sidekiq" unless defined?(SolidJobs::Task)

module Bench
  # Integer arithmetic only: no allocation, so GC does not blur the timing.
  # Returns the result so the loop cannot be optimised away.
  def self.spin(iterations)
    acc = 0
    i = 0
    while i < iterations
      acc = (acc * 31 + i) & 0xFFFFF
      i += 1
    end
    acc
  end

  # Allocations inside a worker process, for the comparison. The jobs file
  # (loaded after the job library, before any worker starts) records
  # GC.stat(:total_allocated_objects), and the process writes "<baseline>
  # <final>" to <dir>/alloc-<pid> at exit: worker start, every job,
  # heartbeats and the graceful stop, process-wide, Ractors included. A
  # process that exits without at_exit (KILL, Kernel.exit!) writes nothing;
  # the harness reports that as an unclean stop.
  module WorkerStats
    module_function

    def install(dir)
      baseline = GC.stat(:total_allocated_objects)
      at_exit { File.write(File.join(dir, "alloc-#{Process.pid}"), "#{baseline} #{GC.stat(:total_allocated_objects)}\n") }
    end

    # {pid => allocations} of every worker process that wrote its file.
    def read(dir)
      Dir[File.join(dir, "alloc-*")].to_h do |path|
        baseline, final = File.read(path).split.map { |v| Integer(v) }
        [Integer(File.basename(path).delete_prefix("alloc-")), final - baseline]
      end
    end
  end

  # Proof that every job ran exactly once, for the stress drain; off unless
  # BENCH_LEDGER_DIR is set, so the comparison's timings never include it.
  # Each worker thread (or Ractor: each has its own thread) appends job
  # numbers to its own file, unbuffered, so nothing is lost to a buffer at
  # exit and no two writers share a file.
  module JobLedger
    # A frozen String (or nil), hence shareable: worker Ractors read it.
    DIR = ENV["BENCH_LEDGER_DIR"]&.dup&.freeze

    Tally = Struct.new(:exactly_once, :missing, :duplicates, :unexpected, keyword_init: true)

    module_function

    def record(n)
      return unless DIR && n

      file = Thread.current[:bench_job_ledger] ||=
        File.open(File.join(DIR, "#{Process.pid}-#{Thread.current.object_id}.ids"), "a").tap { |f| f.sync = true }
      file.write("#{n}\n")
    end

    # Jobs 0...jobs each expected exactly once.
    def tally(dir, jobs)
      seen = Hash.new(0)
      Dir[File.join(dir, "*.ids")].each { |path| File.foreach(path) { |line| seen[Integer(line)] += 1 } }
      expected = 0...jobs
      Tally.new(exactly_once: seen.count { |n, times| expected.cover?(n) && times == 1 },
                missing: jobs - seen.count { |n, _| expected.cover?(n) },
                duplicates: seen.sum { |n, times| expected.cover?(n) ? times - 1 : 0 },
                unexpected: seen.sum { |n, times| expected.cover?(n) ? 0 : times })
    end
  end

  # Enqueue→start latency, stamped by the job itself: the producer reads
  # the clock right before the enqueue call and passes the reading as the
  # job's first argument; the job, first thing, appends "enqueued started"
  # to one file, which the harness reads. It never talks to the worker, so
  # it works alike for Sidekiq threads, worker Ractors and any number of
  # processes.
  #
  # CLOCK_MONOTONIC in nanoseconds: one system-wide clock on Linux,
  # comparable across processes, and never stepped (NTP), which over a long
  # soak could make latencies negative or inflated. Each line is one
  # write(2) on a file opened O_APPEND, which the kernel appends whole even
  # with several writers at once: no lock, nothing a Ractor may not touch.
  module StartLog
    # Read here, at load time in the main Ractor, into a frozen constant:
    # worker Ractors read the constant, never ENV.
    PATH = ENV["BENCH_START_LOG"]&.dup&.freeze
    # How often a waiting harness looks for a new line: only its reaction
    # time depends on it, never a latency (both stamps come from the jobs).
    POLL_INTERVAL = 0.0003

    Start = Struct.new(:enqueued_ns, :started_ns) do
      def latency_ms = (started_ns - enqueued_ns) / 1_000_000.0
    end

    def self.now_ns = Process.clock_gettime(Process::CLOCK_MONOTONIC, :nanosecond)

    def self.record(enqueued_ns)
      started = now_ns
      raise ArgumentError, "BENCH_START_LOG was not set when the jobs file was loaded" unless PATH

      File.open(PATH, "a") { |f| f.write("#{enqueued_ns} #{started}\n") }
    end

    # The harness's side: the starts appended since the last read, and
    # which jobs started, by their enqueue stamp (unique: one producer, a
    # monotonic clock), so a job that never starts, or starts twice, is
    # caught at the end of a long run.
    class Reader
      attr_reader :duplicates

      def initialize(path)
        @path = path
        @partial = +""
        @seen = Set.new
        @duplicates = 0
      end

      def started = @seen.size

      # A line still being written (no newline yet) waits for the next call.
      def read_new
        @file ||= File.exist?(@path) ? File.open(@path, "r") : nil # the first start creates it
        return [] unless @file

        lines = (@partial + @file.read).split("\n", -1)
        @partial = lines.pop || +""
        lines.map { |line| parse(line) }.each { |s| @duplicates += 1 unless @seen.add?(s.enqueued_ns) }
      end

      # Blocks until `n` new starts were read, and returns them. Fails after
      # `timeout` seconds, or at once when the workers exited.
      def wait_for(n, timeout:, workers:)
        starts = []
        deadline = Bench.now + timeout
        loop do
          starts.concat(read_new)
          return starts if starts.size >= n
          raise Failure, "the worker exited (#{workers.exit_status.inspect}) before #{n} job(s) started" if workers.exited?
          raise Failure, "only #{starts.size} of #{n} job(s) started within #{timeout}s" if Bench.now > deadline

          sleep POLL_INTERVAL
        end
      end

      def close = @file&.close

      private

      def parse(line)
        enqueued, started = line.split(" ", 2)
        Start.new(Integer(enqueued), Integer(started))
      rescue ArgumentError, TypeError
        raise Failure, "malformed line in the start log #{@path}: #{line.inspect}"
      end
    end
  end

  # The throttled starts of benchmark/flow.rb: each is one line, "n\n",
  # one write(2) on a file opened O_APPEND (as StartLog), so the harness
  # counts whole lines only and no Ractor shares a handle.
  module FlowStarts
    PATH = ENV["BENCH_FLOW_STARTS"]&.dup&.freeze

    def self.record(n)
      File.open(PATH, "a") { |f| f.write("#{n}\n") } if PATH
    end

    def self.count(path) = File.exist?(path) ? File.read(path).count("\n") : 0
  end

  # What a benchmark job does. `n` is the job's number (nil where jobs are
  # not numbered); it only matters to the ledger.
  module JobBodies
    module_function

    def noop(n) = JobLedger.record(n)

    def cpu(iterations, n)
      Bench.spin(iterations)
      JobLedger.record(n)
    end

    # Stands in for waiting on a database or an HTTP call: the worker is
    # blocked but uses no CPU.
    def io(seconds, n)
      sleep(seconds)
      JobLedger.record(n)
    end

    # Even-numbered jobs compute, odd-numbered ones wait, so a backlog
    # seeded in order alternates the two and every worker sees both.
    def mixed(iterations, seconds, n) = n.even? ? cpu(iterations, n) : io(seconds, n)

    def latency(enqueued_ns) = StartLog.record(enqueued_ns)

    # The soak's mix: a short CPU burst, and nested arguments (converted to
    # Ruby objects in the worker, so a leak on that path shows in its RSS).
    def latency_cpu(enqueued_ns, iterations)
      StartLog.record(enqueued_ns)
      Bench.spin(iterations)
    end

    def latency_payload(enqueued_ns, payload)
      StartLog.record(enqueued_ns)
      payload.fetch("tags").size + payload.fetch("note").size
    end
  end

  # Twin name => the job body's parameters (the trailing job number is
  # optional where a harness does not number its jobs). Each twin is a
  # Sidekiq worker and a SolidJobs task of that name calling the same body.
  TWINS = {"Noop" => "n", "Cpu" => "iterations, n = nil", "Io" => "seconds, n = nil", "Mixed" => "iterations, seconds, n",
           "Latency" => "enqueued_ns", "LatencyCpu" => "enqueued_ns, iterations",
           "LatencyPayload" => "enqueued_ns, payload"}.freeze

  # Defined from source text, not define_method: a method whose body is a
  # Proc of the main Ractor cannot be called from a worker Ractor.
  def self.define_twins(prefix, preamble, method)
    TWINS.each do |twin, parameters|
      body = twin.gsub(/(?<=[a-z])(?=[A-Z])/, "_").downcase
      Object.class_eval(<<~RUBY, __FILE__, __LINE__ + 1)
        class #{prefix}#{twin}
          #{preamble}
          def #{method}(#{parameters}) = Bench::JobBodies.#{body}(#{parameters.gsub(" = nil", "")})
        end
      RUBY
    end
  end
end

# Only worker processes get the variable; the harness process never does.
Bench::WorkerStats.install(ENV["BENCH_STATS_DIR"]) if ENV["BENCH_STATS_DIR"]

if defined?(Sidekiq)
  # Sidekiq logs every job at INFO; at 100k jobs that is a benchmark of the
  # logger, not of the job system.
  Sidekiq.configure_server { |config| config.logger.level = Logger::WARN }
  # Sidekiq 6.4.1 passes BRPOP's timeout positionally, and redis-rb 4.8
  # (Debian pairs the two) prints a two-line deprecation warning on every
  # fetch, i.e. on every job, and another on every push. Writing them out
  # would slow Sidekiq down for a reason unrelated to its design.
  Redis.silence_deprecations = true

  Bench.define_twins("Sidekiq", "include Sidekiq::Worker; sidekiq_options queue: \"bench\", retry: false", "perform")
end

if defined?(SolidJobs::Task)
  # Every channel on one SolidEngine server: the worker's routing here, the
  # producer's in SolidEngineSystem.
  def Bench.use_engine(url)
    SolidJobs.configure do |c|
      c.backend = :solid_engine
      c.url = url
      c.backends = {solid_engine: {adapter: :solid_engine, url: url}}
    end
  end

  Bench.use_engine(ENV["BENCH_ENGINE_URL"]) if ENV["BENCH_ENGINE_URL"]
  # Schedules every 1, 30, 60, 300, 600... s to a channel the worker does
  # not serve: what the scheduler costs an idle node, not the jobs.
  if (n = Integer(ENV.fetch("BENCH_RECURRING", "0"))).positive?
    periods = [1, 30, 60, 300] + (5..n).map { |i| 300 * i }
    SolidJobs.configure do |c|
      c.recurring = periods.first(n).each_with_index.to_h do |every, i|
        ["bench-#{i}", {task: "Bench::SolidNoop", every: every, channel: "bench-recurring"}]
      end
    end
  end
  Bench.define_twins("Solid", "include SolidJobs::Task; task_options channel: \"bench\"", "execute_task")
  # benchmark/flow.rb: one no-op job, unlimited, under two concurrency
  # limits and under a rate, and a throttled backlog. All take (key, n) and
  # the measured ones are seeded with the same lists, so they differ in the
  # limit alone. SolidJobs only: Sidekiq has no limit outside its paid
  # editions, and SolidEngine refuses limited jobs.
  class SolidFlowUnlimited
    include SolidJobs::Task
    task_options channel: "bench"
    def execute_task(_key, n) = Bench::JobBodies.noop(n)
  end

  # Many keys, a few slots each: slots are taken and freed, jobs are
  # (almost) never over the limit.
  class SolidFlowSpread
    include SolidJobs::Task
    task_options channel: "bench", concurrency: {limit: 5, key: ->(key, _n) { key }}
    def execute_task(_key, n) = Bench::JobBodies.noop(n)
  end

  # One key for the whole task, as many slots as the benchmark's workers:
  # a claim that wants more than the free slots sets the rest aside, so
  # nearly every job is blocked once and moved back by a release.
  class SolidFlowHot
    include SolidJobs::Task
    task_options channel: "bench", concurrency: {limit: 8}
    def execute_task(_key, n) = Bench::JobBodies.noop(n)
  end

  # Many keys, each under its rate: 1,000 keys get 50 jobs each of 50,000,
  # and each may start 100 per second, so the log is written at every
  # admission and never refuses one, however fast the drain. The default
  # slack (50 ms): the node's prefetch window follows the starts' waits, so
  # the drain hands back (almost) nothing (test/flow_rate_backlog_test.rb).
  class SolidFlowRateSpread
    include SolidJobs::Task
    task_options channel: "bench", rate: {limit: 100, per: 1, key: ->(key, _n) { key }}
    def execute_task(_key, n) = Bench::JobBodies.noop(n)
  end

  # The backlog of flow.rb's unlimited-beside-throttled: one key for the
  # whole task at 10 starts per second, thousands of jobs, so nearly all of
  # them are throttled for the whole drain. Each start is counted in
  # FlowStarts, so the harness can tell the unlimited jobs' completions
  # from the few throttled ones that ran (`metric:processed` counts both).
  class SolidFlowThrottled
    include SolidJobs::Task
    task_options channel: "bench", rate: {limit: 10, per: 1}
    def execute_task(_key, n) = Bench::FlowStarts.record(n)
  end
end
