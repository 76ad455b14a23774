# frozen_string_literal: true

require_relative "common"
require_relative "engine_server"
require_relative "queue_probes"
require_relative "worker_process"

module Bench
  # What differs between SolidJobs on SolidEngine and SolidJobs on Redis in
  # benchmark/engine.rb's end-to-end cases, behind one interface:
  #
  #   prepare(name)          empty backend, benchmark process configured as producer
  #   probe                  a DrainWatch probe (queue_probes.rb)
  #   start_worker(c, log)   the solid-jobs CLI against this backend (options
#                          such as jobs_file: go to WorkerProcess)
  #   verify(jobs)           every job completed exactly once, none failed
  #   finish                 end the case; raises Failure on an unclean stop
  #   cleanup                idempotent, for ensure

  # A fresh memory-durability engine server per case, so no state (completed
  # jobs are kept for a minute) carries over between cases.
  class EngineSystem
    def initialize(children, dir)
      @children = children
      @dir = dir
    end

    # The engine server of the current case (for its pid), nil before prepare.
    attr_reader :server

    def key = :engine
    def label = "SolidEngine"

    def prepare(name)
      @server = EngineServer.new(@children, File.join(@dir, "e2e-#{name}"), durability: "memory").start
      url = @server.url
      @client = SolidJobs::Native::EngineClient.new(url, nil)
      SolidJobs.reset!
      SolidJobs.configure do |c|
        c.backend = :solid_engine
        c.url = url
        c.backends = {solid_engine: {adapter: :solid_engine, url: url}}
      end
    end

    def probe = EngineQueueProbe.new(@client)

    def start_worker(concurrency, log_path, **options)
      WorkerProcess.solid_jobs_engine(@children, @server.url, concurrency, log_path, **options).start
    end

    def verify(jobs)
      stats = probe.stats
      acked, failed, retried = stats.values_at("acked_total", "failed_total", "retried_total")
      return if acked == jobs && failed.zero? && retried.zero?

      raise Failure, "engine STATS acked_total=#{acked} (expected #{jobs}), failed_total=#{failed}, retried_total=#{retried} (expected 0)"
    end

    def finish
      problem = @server.stop
      raise Failure, problem if problem
    end

    def cleanup
      @server&.stop
    end
  end

  # One private redis-server for the whole run, flushed per case (as in
  # benchmark/throughput.rb).
  class RedisSystem
    LIST = "solid_jobs:channel:bench"
    CLAIMS = "solid_jobs:claims:*"

    def initialize(children, server, redis)
      @children = children
      @server = server
      @redis = redis
    end

    def key = :redis
    def label = "Redis"

    def prepare(_name)
      @redis.flushall
      SolidJobs.reset!
      SolidJobs.configure { |c| c.redis_url = @server.url }
    end

    def probe = RedisQueueProbe.new(@redis, list_key: LIST, claims_pattern: CLAIMS)

    def start_worker(concurrency, log_path, **options)
      WorkerProcess.solid_jobs(@children, @server.url, concurrency, log_path, **options).start
    end

    # The worker's counters; read after it stopped, so they are complete.
    def verify(jobs)
      processed = @redis.get("solid_jobs:metric:processed").to_i
      failed = @redis.get("solid_jobs:metric:failed").to_i
      return if processed == jobs && failed.zero?

      raise Failure, "solid_jobs:metric:processed=#{processed} (expected #{jobs}), solid_jobs:metric:failed=#{failed} (expected 0)"
    end

    def finish = nil
    def cleanup = nil
  end
end
