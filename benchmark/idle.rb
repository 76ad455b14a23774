# frozen_string_literal: true

# What an idle worker costs: CPU of the worker process and Redis commands
# per second while it has nothing to do, for SolidJobs (its CLI, Redis
# backend) and Sidekiq (its CLI), both at concurrency 8, one after the
# other against one private redis-server.
#
#   bundle exec rake benchmark:idle
#   BENCH_SMOKE=1 bundle exec rake benchmark:idle   # seconds, for tests
#
# Environment (defaults in parentheses):
#   BENCH_IDLE_SECONDS (10)         length of the measured idle window
#   BENCH_IDLE_SETTLE_SECONDS (2)   wait after the warm-up jobs, before it
#   BENCH_IDLE_WARMUP_JOBS (50)     no-op jobs processed first, so the worker
#                                   is booted and has done real work
#   BENCH_IDLE_CONCURRENCY (8)      worker concurrency (threads / Ractors)
#   BENCH_SMOKE=1                   1 s window, 1 s settle, 10 jobs; writes no
#                                   results unless BENCH_OUTPUT_DIR is set
#   BENCH_OUTPUT_DIR (benchmark/results)  where idle.md and idle.csv go
#
# Per system: FLUSHALL, start the worker, push the warm-up jobs, wait until
# they are processed, settle, then over the window read the worker's CPU
# time (/proc/<pid>/stat utime+stime, all threads; and the scheduler runtime
# of its threads, which resolves wake-ups shorter than a clock tick) and the server's INFO
# commandstats at both ends, less the one INFO of the harness's own inside
# the window. A MONITOR connection records the same window so SolidJobs'
# commands can be split into its heartbeat (an EVALSHA of the heartbeat
# script, known by its SHA1, and the commands that script runs) and
# anything else. Exit status is non-zero only when a case could not be
# measured; missing a target is a result, not an error.

$LOAD_PATH.unshift(File.expand_path("../lib", __dir__))
require "solid_jobs"
require "sidekiq"
require "redis"
require "fileutils"
require "tmpdir"
require_relative "support/harness"
require_relative "support/worker_process"
require_relative "support/command_stats"
require_relative "support/proc_facts"
require_relative "support/redis_monitor"
require_relative "support/heartbeat_attribution"
require_relative "support/idle_report"
require_relative "enqueue_idle_jobs"

module Bench
  IdleSettings = Struct.new(:seconds, :settle_seconds, :warmup_jobs, :concurrency, :output_dir, keyword_init: true)

  class IdleBenchmark < Harness
    ROOT = File.expand_path("..", __dir__)
    DEFAULT_OUTPUT_DIR = File.join(ROOT, "benchmark/results")
    JOBS_FILE = "./benchmark/enqueue_idle_jobs.rb"
    WARM_UP_TIMEOUT = 60
    # How long MONITOR may lag behind the window's closing INFO.
    MONITOR_LAG = 5

    # What differs between the two systems, in one place. The keys name the
    # WorkerProcess factory methods; `warmed_up` is true once the warm-up
    # jobs are done. Sidekiq writes its processed counter only every few
    # seconds, so for it an empty queue has to do (the no-op jobs still
    # held by its threads finish long before the settle time is over).
    SYSTEMS = {
      sidekiq: {
        push: ->(lists) { Sidekiq::Client.push_bulk("class" => NoopSidekiqJob, "args" => lists) },
        warmed_up: ->(redis, _jobs) { redis.llen("queue:bench").zero? }
      },
      solid_jobs: {
        push: ->(lists) { NoopSolidTask.enqueue_many(lists) },
        warmed_up: ->(redis, jobs) { redis.get("solid_jobs:metric:processed").to_i >= jobs }
      }
    }.freeze

    def self.settings(env)
      smoke = smoke?(env)
      IdleSettings.new(
        seconds: Bench.positive_integer(env, "BENCH_IDLE_SECONDS", smoke ? 1 : 10),
        settle_seconds: Bench.positive_integer(env, "BENCH_IDLE_SETTLE_SECONDS", smoke ? 1 : 2),
        warmup_jobs: Bench.positive_integer(env, "BENCH_IDLE_WARMUP_JOBS", smoke ? 10 : 50),
        concurrency: Bench.positive_integer(env, "BENCH_IDLE_CONCURRENCY", 8),
        output_dir: output_setting(env, "BENCH_OUTPUT_DIR", DEFAULT_OUTPUT_DIR, smoke: smoke)
      )
    end

    def initialize(settings)
      super
      @attribution = HeartbeatAttribution.new
    end

    def run
      open_lab(tmpdir: "solid-jobs-bench-idle")
      Sidekiq.configure_client { |config| config.redis = {url: @lab.url} }
      SolidJobs.configure { |config| config.redis_url = @lab.url }
      puts results_header, settings_line
      results = SYSTEMS.keys.map { |system| measure(system) }
      publish(IdleReport.new(results))
      results.all?(&:ok?) ? 0 : 1
    ensure
      @lab&.close
    end

    private

    def settings_line
      "Idle window #{@settings.seconds} s after #{@settings.warmup_jobs} warm-up jobs and #{@settings.settle_seconds} s " \
        "settle; worker concurrency #{@settings.concurrency} (SolidJobs: default execution mode, Ractors)"
    end

    def measure(system)
      print "#{system} c=#{@settings.concurrency}: "
      result = IdleResult.new(system: system, concurrency: @settings.concurrency)
      @lab.redis.flushall
      worker = WorkerProcess.public_send(system, @lab.children, @lab.url, @settings.concurrency,
                                         File.join(@lab.dir, "#{system}.log"), jobs_file: JOBS_FILE).start
      warm_up(system, worker)
      sleep @settings.settle_seconds
      observe_idle(system, worker, result)
      puts format("%.2f%% CPU (/proc stat), %s%% (scheduler), %.2f Redis cmds/s", result.cpu_percent,
                  result.scheduler_cpu_percent ? format("%.3f", result.scheduler_cpu_percent) : "n/a", result.commands_per_second)
      result
    rescue Failure, Redis::BaseError, SystemCallError => e
      puts "ERROR"
      result.error = "#{e.class}: #{e.message}#{worker && "\nworker output (last lines):\n#{worker.log_tail}"}"
      warn "  #{result.error.gsub("\n", "\n  ")}"
      result
    ensure
      worker&.stop
    end

    def warm_up(system, worker)
      jobs = @settings.warmup_jobs
      SYSTEMS.fetch(system).fetch(:push).call(Array.new(jobs) { |i| [i] })
      deadline = Bench.now + WARM_UP_TIMEOUT
      until SYSTEMS.fetch(system).fetch(:warmed_up).call(@lab.redis, jobs)
        raise Failure, "worker exited (#{worker.exit_status}) during warm-up" if worker.exited?
        raise Failure, "warm-up jobs not processed within #{WARM_UP_TIMEOUT}s" if Bench.now > deadline

        sleep 0.05
      end
    end

    # The window is bounded by two INFO commandstats calls on a connection
    # of its own; in the MONITOR stream those two calls mark the same window,
    # so both counts cover exactly the same commands.
    def observe_idle(system, worker, result)
      probe = Redis.new(url: @lab.url)
      probe_address = probe.call("client", "info")[/\baddr=(\S+)/, 1]
      monitor = RedisMonitor.new(@lab.redis_server.port).start
      before = CommandStats.snapshot(probe)
      cpu_before = ProcFacts.cpu_seconds!(worker.pid)
      scheduler_before = ProcFacts.scheduler_seconds(worker.pid)
      started = Bench.now
      sleep @settings.seconds
      cpu_after = ProcFacts.cpu_seconds!(worker.pid)
      scheduler_after = ProcFacts.scheduler_seconds(worker.pid)
      result.seconds = Bench.now - started
      after = CommandStats.snapshot(probe)
      raise Failure, "worker exited (#{worker.exit_status}) during the idle window" if worker.exited?

      result.cpu_seconds = cpu_after - cpu_before
      result.scheduler_cpu_seconds = scheduler_after - scheduler_before if scheduler_before && scheduler_after
      result.commands = CommandStats.delta(before, after, {"info" => 1})
      result.heartbeat = heartbeat_calls(monitor, probe_address) if system == :solid_jobs
    ensure
      monitor&.stop
      probe&.close
    end

    # nil (not attributed) when MONITOR did not deliver the window's end in
    # time; every command then counts as beyond the heartbeat.
    def heartbeat_calls(monitor, probe_address)
      own = ->(entry) { entry.source == probe_address }
      complete = monitor.wait_for(MONITOR_LAG) { |entries| entries.count(&own) >= 2 }
      return nil unless complete

      entries = monitor.entries
      first, last = entries.each_index.select { |i| own.(entries[i]) }.first(2)
      @attribution.heartbeat_calls(entries[(first + 1)...last])
    end

    def publish(report)
      body = [report.summary_table, "", "Redis commands in the idle window:", "", report.command_table, "",
              heartbeat_line, "", "Targets:", *report.target_lines.map { |l| "- #{l}" }]
      body = with_errors(body, report)
      puts "", body
      return unless @settings.output_dir

      markdown = "# Idle cost: SolidJobs vs Sidekiq\n\n#{results_header}\n\n#{settings_line}. " \
                 "#{method_note}\n\n#{body}\n"
      write_results(@settings.output_dir, "idle", markdown, report)
    end

    # Says whether the SHA the attribution looks for is the script the
    # worker actually loaded into this server.
    def heartbeat_line
      loaded = @attribution.shas.zip(Array(@lab.redis.script(:exists, @attribution.shas))).select(&:last).map(&:first)
      "Heartbeat script: SHA1 #{loaded.first || @attribution.sha} of crates/solid_core/lua/heartbeat.lua with the Lua prelude " \
        "(#{loaded.any? ? "loaded in this redis-server" : "NOT loaded in this redis-server: attribution by SHA found nothing"}); " \
        "the heartbeat tick also counts what the heartbeat thread's connection sends with it (the telemetry flush)."
    end

    def method_note
      "Worker CPU: /proc/<pid>/stat utime+stime of the worker process (all threads) over the window, as a share of " \
        "one core (clock-tick resolution); also the scheduler's runtime of its threads (se.sum_exec_runtime in " \
        "/proc/<pid>/task/*/sched), which sees wake-ups too short for a tick. Redis commands: INFO commandstats delta over the same window (less the harness's own INFO), " \
        "commands run inside Lua scripts included. SolidJobs' heartbeat: EVALSHA of the heartbeat script and the " \
        "commands it runs, attributed through MONITOR. Run at #{Time.now.utc.strftime("%Y-%m-%d %H:%M UTC")}; " \
        "generated by `bundle exec rake benchmark:idle`."
    end
  end
end

exit Bench::IdleBenchmark.main(ENV) if $PROGRAM_NAME == __FILE__
