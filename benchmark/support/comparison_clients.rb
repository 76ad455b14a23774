# frozen_string_literal: true

require_relative "common"
require_relative "e2e_systems"
require_relative "queue_probes"
require_relative "worker_process"
require_relative "worker_set"

module Bench
  # What one benchmark case needs from its job system, behind one
  # interface (the clients of benchmark/comparison.rb):
  #
  #   prepare(context)          empty backend; this process configured as producer
  #   seed(job_class, lists)    enqueue every job (workers not started yet)
  #   seeded                    jobs now waiting, to check the seed
  #   start_workers(c, dir)     a started WorkerSet
  #   release(workers, timeout) let the workers at the jobs (Sidekiq only)
  #   probe                     a DrainWatch probe
  #   own_commands              Redis commands this process sent after seeding
  #   counts                    {processed:, failed:} by the system's own counters,
  #                             read after the workers stopped
  #   finish                    nil, or what went wrong stopping a server
  #   cleanup                   idempotent, for ensure
  #
  # CaseContext: per-case children (CaseChildren), the case's redis-server
  # and a connection to it, and a scratch directory.
  CaseContext = Struct.new(:children, :redis_server, :redis, :dir, keyword_init: true)

  # Sidekiq 6.4 through its own CLI: one process with N threads, or N
  # processes with one thread each.
  class SidekiqClient
    LIST = "queue:bench"
    # Jobs are seeded into a queue no worker watches and renamed into
    # "bench" once every process has booted: N Ruby processes booting on a
    # 2-core host take seconds, and the first one up would otherwise start
    # the clock while the others still compete with it for the CPU.
    STAGING_QUEUE = "staging"
    STAGING_LIST = "queue:#{STAGING_QUEUE}"
    SEED_BATCH = 1000

    attr_reader :key, :label

    def initialize(key, label, processes:)
      @key = key
      @label = label
      @processes = processes
    end

    def family = :sidekiq
    def uses_redis? = true
    def worker_env = {}

    def prepare(context)
      @context = context
      @own = Hash.new(0)
      @probe = RedisQueueProbe.new(context.redis, list_key: LIST)
      Sidekiq.configure_client { |config| config.redis = {url: context.redis_server.url} }
    end

    def seed(job_class, argument_lists)
      argument_lists.each_slice(SEED_BATCH) do |slice|
        Sidekiq::Client.push_bulk("class" => job_class, "args" => slice, "queue" => STAGING_QUEUE)
      end
    end

    def seeded = @context.redis.llen(STAGING_LIST)

    def start_workers(concurrency, log_dir)
      workers = if @processes
                  Array.new(concurrency) { |i| sidekiq(1, File.join(log_dir, "sidekiq-#{i + 1}.log")) }
                else
                  [sidekiq(concurrency, File.join(log_dir, "sidekiq.log"))]
                end
      WorkerSet.new(workers)
    end

    # Every process adds itself to the "processes" set at its first
    # heartbeat, sent as its launcher starts the fetchers: by then it has
    # booted (Rails-less, the fetchers follow within milliseconds).
    def release(workers, timeout)
      deadline = Bench.now + timeout
      loop do
        @own["scard"] += 1
        break if @context.redis.scard("processes") == workers.size
        raise Failure, "a Sidekiq process exited (#{workers.exit_status}) before all #{workers.size} had booted" if workers.exited?
        raise Failure, "#{workers.size} Sidekiq processes did not all boot within #{timeout}s" if Bench.now > deadline

        sleep 0.05
      end
      @own["rename"] += 1
      @context.redis.rename(STAGING_LIST, LIST)
    end

    attr_reader :probe

    def own_commands = @probe.own_commands.merge(@own) { |_, a, b| a + b }

    # Sidekiq writes its counters at each heartbeat and at exit.
    def counts
      {processed: @context.redis.get("stat:processed").to_i, failed: @context.redis.get("stat:failed").to_i}
    end

    def finish = nil
    def cleanup = nil

    private

    def sidekiq(threads, log_path)
      WorkerProcess.sidekiq(@context.children, @context.redis_server.url, threads, log_path).start
    end
  end

  # SolidJobs through its CLI, one process, on Redis or on SolidEngine; the
  # backends' differences live in e2e_systems.rb.
  class SolidClient
    SEED_BATCH = 1000

    attr_reader :key, :label

    def initialize(key, label, backend:, execution_mode: nil)
      @key = key
      @label = label
      @backend = backend
      @execution_mode = execution_mode
    end

    def family = :solid
    def uses_redis? = @backend == :redis

    # The CLI factory for SolidEngine has no execution-mode flag; jobs.rb
    # reads this instead.
    def worker_env = @execution_mode ? {"BENCH_EXECUTION_MODE" => @execution_mode} : {}

    # A fresh memory-durability engine server per case (EngineSystem); for
    # Redis, the case's own redis-server.
    def prepare(context)
      @redis = context.redis
      @system = if @backend == :engine
                  EngineSystem.new(context.children, context.dir)
                else
                  RedisSystem.new(context.children, context.redis_server, context.redis)
                end
      @system.prepare("engine") # names the server's directory
      @probe = @system.probe
    end

    def seed(job_class, argument_lists)
      argument_lists.each_slice(SEED_BATCH) { |slice| job_class.enqueue_many(slice) }
    end

    def seeded = @probe.waiting

    def start_workers(concurrency, log_dir)
      WorkerSet.new([@system.start_worker(concurrency, File.join(log_dir, "solid-jobs.log"))])
    end

    def release(_workers, _timeout) = nil

    attr_reader :probe

    def own_commands = @probe.respond_to?(:own_commands) ? @probe.own_commands : {}

    def counts
      if @backend == :engine
        stats = @probe.stats
        {processed: stats.fetch("acked_total"), failed: stats.fetch("failed_total") + stats.fetch("retried_total")}
      else
        {processed: @redis.get("solid_jobs:metric:processed").to_i, failed: @redis.get("solid_jobs:metric:failed").to_i}
      end
    end

    def finish
      @system.finish
      nil
    rescue Failure => e
      e.message
    end

    def cleanup = @system&.cleanup
  end

  # The clients benchmark/comparison.rb and stress.rb know, by the names
  # BENCHMARK_CLIENTS / STRESS_CLIENTS take.
  module Clients
    ALL = {
      "sidekiq" => -> { SidekiqClient.new("sidekiq", "Sidekiq (1 process, N threads)", processes: false) },
      "sidekiq-procs" => -> { SidekiqClient.new("sidekiq-procs", "Sidekiq (N processes, 1 thread)", processes: true) },
      "solid-jobs" => -> { SolidClient.new("solid-jobs", "SolidJobs on Redis (Ractors)", backend: :redis) },
      "solid-jobs-engine" => -> { SolidClient.new("solid-jobs-engine", "SolidJobs on SolidEngine (Ractors)", backend: :engine) },
      "solid-jobs-engine-threads" => lambda {
        SolidClient.new("solid-jobs-engine-threads", "SolidJobs on SolidEngine (threads)", backend: :engine, execution_mode: "thread")
      }
    }.freeze

    def self.names = ALL.keys
    def self.build(name) = ALL.fetch(name).call
    def self.uses_redis?(name) = build(name).uses_redis?
  end
end
