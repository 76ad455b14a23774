# frozen_string_literal: true

require "fileutils"
require "redis"
require_relative "common"
require_relative "case_children"
require_relative "case_result"
require_relative "command_stats"
require_relative "comparison_clients"
require_relative "drain_watch"
require_relative "job_ledger"
require_relative "metered_probe"
require_relative "redis_server"
require_relative "worker_stats"

module Bench
  # Runs one case of benchmark/comparison.rb or stress.rb once, from a
  # clean slate: its own redis-server (and engine server for SolidEngine
  # clients), so no memory, counters or commands carry over between cases.
  #
  #   1. seed every job (workers not running)
  #   2. start the worker process(es); Sidekiq's wait for all to boot
  #   3. DrainWatch times the drain; MeteredProbe reads CPU and samples
  #      memory over the same window
  #   4. stop the workers (TERM), then count what the system says it did
  #
  # Errors are counted, not raised: jobs failed, lost or run twice by the
  # system's counters, worker processes that did not stop cleanly, and
  # (with a ledger) job numbers missing or seen twice. A run that could not
  # be measured at all keeps its reason in `failure`.
  class CaseRunner
    def initialize(children:, work:, timeout:, scratch:, ledger: false)
      @children = children
      @work = work
      @timeout = timeout
      @scratch = scratch
      @ledger = ledger
    end

    def run(client, scenario, concurrency, jobs)
      result = RunResult.new(jobs: jobs, errors: {})
      dir = case_dir
      context = start_context(client, dir)
      server_pids = context.children.collect { client.prepare(context) }
      server_pids << redis_pid(context.redis) if client.uses_redis?
      seed(client, scenario, jobs)
      before = CommandStats.snapshot(context.redis)
      workers = nil
      worker_pids = context.children.collect { workers = client.start_workers(concurrency, dir) }
      client.release(workers, @timeout)
      probe = MeteredProbe.new(client.probe, jobs: jobs, worker_pids: worker_pids, server_pids: server_pids)
      result.seconds = drain(probe, jobs, workers).seconds
      after = CommandStats.snapshot(context.redis)
      # The INFO for `before` is itself counted in `after`.
      result.commands = CommandStats.delta(before, after, client.own_commands.merge("info" => 1))
      readings = probe.readings
      result.worker_cpu_seconds, result.server_cpu_seconds, result.peak_pss_kb = readings.to_a
      count_errors(result, client, workers, worker_pids, dir)
      result
    rescue Failure, SolidJobs::Error, Redis::BaseError, SystemCallError => e
      workers&.stop # so its log is complete
      result.failure = "#{e.class}: #{e.message}"
      result.failure += "\nworker: #{workers.description}\nworker output (last lines):\n#{workers.log_tail}" if workers
      result
    ensure
      probe&.close
      workers&.stop
      client.cleanup
      context&.redis&.close
      context&.redis_server&.stop
      FileUtils.rm_rf(dir) if dir
    end

    private

    # Worker processes learn where to write their allocation counts and
    # ledger, and which Redis to use when they need none (SolidEngine), so
    # the case's INFO commandstats would show any stray command.
    def start_context(client, dir)
      redis_server = RedisServer.new(@children).start
      env = {"BENCH_STATS_DIR" => stats_dir(dir), "SOLID_JOBS_REDIS_URL" => redis_server.url}.merge(client.worker_env)
      env["BENCH_LEDGER_DIR"] = ledger_dir(dir) if @ledger
      FileUtils.mkdir_p([stats_dir(dir), ledger_dir(dir)])
      CaseContext.new(children: CaseChildren.new(@children, env), redis_server: redis_server,
                      redis: Redis.new(url: redis_server.url), dir: dir)
    rescue StandardError
      redis_server&.stop
      raise
    end

    # Short on purpose: the engine's Unix socket lives below it, and socket
    # paths are limited to about 100 bytes.
    def case_dir
      @cases = (@cases || 0) + 1
      File.join(@scratch, @cases.to_s).tap { |dir| FileUtils.mkdir_p(dir) }
    end

    def stats_dir(dir) = File.join(dir, "stats")
    def ledger_dir(dir) = File.join(dir, "ledger")

    # redis-server is started by RedisServer, which keeps its pid private.
    def redis_pid(redis) = Integer(redis.info("server").fetch("process_id"))

    def seed(client, scenario, jobs)
      client.seed(scenario.job_class(client.family), scenario.argument_lists(jobs, @work))
      seeded = client.seeded
      raise Failure, "seeding left #{seeded} jobs waiting, expected #{jobs}" unless seeded == jobs
    end

    def drain(probe, jobs, workers)
      window = DrainWatch.new(probe, jobs: jobs, worker: workers, timeout: @timeout).wait
      raise Failure, "the drain finished within one poll interval; use more jobs to time it" unless window.seconds.positive?

      window
    end

    # Counters are complete only once the workers have stopped (Sidekiq
    # writes its own at exit). A worker that exited without writing its
    # allocations skipped its exit hooks (KILL, or Kernel.exit! after the
    # shutdown timeout): an unclean stop even if its status was 0.
    def count_errors(result, client, workers, worker_pids, dir)
      stopped_badly = workers.stop
      allocations = WorkerStats.read(stats_dir(dir))
      result.allocations = allocations.values.sum if allocations.size == worker_pids.size
      counts = client.counts
      errors = {"failed" => counts[:failed], "lost" => result.jobs - counts[:processed],
                "extra completions" => counts[:processed] - result.jobs,
                "unclean stops" => [stopped_badly, worker_pids.size - allocations.size].max}
      errors.merge!(ledger_errors(result, dir)) if @ledger
      if (problem = client.finish)
        warn "  #{problem.gsub("\n", "\n  ")}"
        errors["server stop problems"] = 1
      end
      result.errors = errors.select { |_, n| n.positive? }
    end

    def ledger_errors(result, dir)
      tally = JobLedger.tally(ledger_dir(dir), result.jobs)
      result.exactly_once = tally.exactly_once
      {"never ran" => tally.missing, "ran twice" => tally.duplicates, "unknown job numbers" => tally.unexpected}
    end
  end
end
