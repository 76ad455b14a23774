# frozen_string_literal: true

# Throughput of SolidJobs against Sidekiq, each run by its own CLI as a
# separate worker process, against one private redis-server.
#
#   bundle exec rake benchmark:throughput
#   BENCH_SMOKE=1 bundle exec rake benchmark:throughput   # seconds, for tests
#
# Environment: BENCH_NOOP_JOBS (20000), BENCH_CPU_JOBS (1000),
# BENCH_CASE_TIMEOUT seconds per case (300), BENCH_SMOKE=1 (200 no-op and
# 20 cpu jobs, concurrency 1 only; writes no results file unless
# BENCH_OUTPUT names one), BENCH_OUTPUT (results file path).
#
# Each case: FLUSHALL, pre-seed every job, start the worker process, and time
# the drain from the first job fetched to the last one finished (see
# DrainWatch), so boot time is excluded. Exit status is non-zero only when a
# case could not be measured; missing a target is a result, not an error.

$LOAD_PATH.unshift(File.expand_path("../lib", __dir__))
require "solid_jobs"
require "sidekiq"
require "redis"
require "etc"
require "fileutils"
require "tmpdir"
require_relative "support/common"
require_relative "support/redis_server"
require_relative "support/worker_process"
require_relative "support/drain_watch"
require_relative "support/command_stats"
require_relative "support/report"
require_relative "jobs"

module Bench
  Settings = Struct.new(:noop_jobs, :cpu_jobs, :concurrencies, :case_timeout, :output, :smoke, keyword_init: true)

  class Throughput
    ROOT = File.expand_path("..", __dir__)
    DEFAULT_OUTPUT = File.join(ROOT, "benchmark/results/throughput.md")
    WORKLOADS = %w[noop cpu].freeze
    SEED_BATCH = 1000
    CPU_JOB_SECONDS = 0.003

    # What differs between the two systems, in one place.
    SYSTEMS = {
      sidekiq: {list: "queue:bench", claims: nil, jobs: {"noop" => SidekiqNoop, "cpu" => SidekiqCpu}},
      solid_jobs: {list: "solid_jobs:channel:bench", claims: "solid_jobs:claims:*",
                   jobs: {"noop" => SolidNoop, "cpu" => SolidCpu}}
    }.freeze

    def self.main(env)
      new(settings(env)).run
    rescue Failure => e
      warn "benchmark failed: #{e.message}"
      1
    end

    def self.settings(env)
      smoke = env["BENCH_SMOKE"] == "1"
      Settings.new(
        noop_jobs: smoke ? 200 : positive_integer(env, "BENCH_NOOP_JOBS", 20_000),
        cpu_jobs: smoke ? 20 : positive_integer(env, "BENCH_CPU_JOBS", 1000),
        concurrencies: smoke ? [1] : [1, 2],
        case_timeout: positive_integer(env, "BENCH_CASE_TIMEOUT", 300),
        # A smoke run must not overwrite the real results.
        output: env["BENCH_OUTPUT"] || (smoke ? nil : DEFAULT_OUTPUT),
        smoke: smoke
      )
    end

    def self.positive_integer(env, name, default)
      return default unless env[name]

      value = Integer(env[name], exception: false)
      raise Failure, "#{name} must be a positive integer (got #{env[name].inspect})" unless value&.positive?

      value
    end

    def initialize(settings)
      @settings = settings
    end

    def run
      $stdout.sync = true
      # Other work on a 2-core host skews every number; record how busy it was.
      @load_at_start = load_average
      @log_dir = Dir.mktmpdir("solid-jobs-bench-logs")
      @server = RedisServer.new.start
      @redis = Redis.new(url: @server.url)
      configure_producers(@server.url)
      @cpu_iterations, @cpu_job_ms = calibrate_cpu
      puts "Load average #{@load_at_start}; Redis #{@server.url}; cpu job = #{@cpu_iterations} iterations (#{format("%.2f", @cpu_job_ms)} ms here)"
      results = cases.map { |system, workload, concurrency| measure_case(system, workload, concurrency) }
      publish(results)
      results.all?(&:ok?) ? 0 : 1
    ensure
      @redis&.close
      @server&.stop
      FileUtils.rm_rf(@log_dir) if @log_dir
    end

    private

    def cases
      WORKLOADS.product(@settings.concurrencies, SYSTEMS.keys).map { |workload, concurrency, system| [system, workload, concurrency] }
    end

    def job_count(workload) = workload == "noop" ? @settings.noop_jobs : @settings.cpu_jobs

    # The benchmark process is the producer for both systems.
    # redis-rb 4.8 warns on every Sidekiq push about a future SADD return
    # type; the noise would bury the results.
    def configure_producers(url)
      Redis.silence_deprecations = true
      Sidekiq.configure_client { |config| config.redis = {url: url} }
      SolidJobs.configure { |config| config.redis_url = url }
    end

    # Iterations of BenchCpu.spin that take CPU_JOB_SECONDS here, from the
    # median of a few timed runs (the first run warms up the method cache).
    # Both systems get the same count, so they do identical work per job.
    def calibrate_cpu
      probe = 300_000
      BenchCpu.spin(probe)
      timings = Array.new(7) do
        started = Bench.now
        BenchCpu.spin(probe)
        Bench.now - started
      end
      per_iteration = timings.sort[timings.size / 2] / probe
      iterations = (CPU_JOB_SECONDS / per_iteration).round
      [iterations, iterations * per_iteration * 1000]
    end

    def measure_case(system, workload, concurrency)
      print "#{system} #{workload} c=#{concurrency}: "
      result = measure(system, workload, concurrency)
      puts(result.ok? ? format("%.0f jobs/s (%.3f s), %.2f Redis cmds/job", result.jobs_per_second, result.seconds, result.commands_per_job) : "ERROR")
      warn "  #{result.error.gsub("\n", "\n  ")}" unless result.ok?
      result
    end

    def measure(system, workload, concurrency)
      jobs = job_count(workload)
      result = Result.new(system: system, workload: workload, concurrency: concurrency, jobs: jobs)
      seed(system, workload, jobs)
      before = CommandStats.snapshot(@redis)
      worker = start_worker(system, workload, concurrency)
      window = drain(system, jobs, worker)
      after = CommandStats.snapshot(@redis)
      # The INFO for `before` is itself counted in `after`.
      result.commands = CommandStats.delta(before, after, window.own_commands.merge("info" => 1))
      result.seconds = window.seconds
      stop_worker(worker, result)
      verify_processed(system, jobs)
      result
    rescue Failure, Redis::BaseError, SystemCallError => e
      worker&.stop # so its log is complete
      result.error = failure_message(e, worker)
      result
    ensure
      worker&.stop
    end

    def seed(system, workload, jobs)
      @redis.flushall
      job_class = SYSTEMS.fetch(system)[:jobs].fetch(workload)
      (0...jobs).each_slice(SEED_BATCH) do |slice|
        lists = slice.map { |i| workload == "noop" ? [i] : [@cpu_iterations] }
        system == :sidekiq ? Sidekiq::Client.push_bulk("class" => job_class, "args" => lists) : job_class.enqueue_many(lists)
      end
      queued = @redis.llen(SYSTEMS.fetch(system)[:list])
      raise Failure, "seeding left #{queued} jobs queued, expected #{jobs}" unless queued == jobs
    end

    def start_worker(system, workload, concurrency)
      log = File.join(@log_dir, "#{system}-#{workload}-#{concurrency}.log")
      factory = system == :sidekiq ? :sidekiq : :solid_jobs
      WorkerProcess.public_send(factory, @server.url, concurrency, log).start
    end

    def drain(system, jobs, worker)
      spec = SYSTEMS.fetch(system)
      window = DrainWatch.new(@redis, list_key: spec[:list], claims_pattern: spec[:claims], jobs: jobs,
                                      worker: worker, timeout: @settings.case_timeout).wait
      raise Failure, "the drain finished within one poll interval; use more jobs to time it" unless window.seconds.positive?

      window
    end

    # A worker that ignores TERM is a finding in itself; the rate measured
    # before it is kept in the message.
    def stop_worker(worker, result)
      return if worker.stop

      raise Failure, format("worker did not exit within %ds of TERM and was killed (it had drained at %.0f jobs/s)",
                            WorkerProcess::STOP_TIMEOUT, result.jobs_per_second)
    end

    # An empty queue also follows from jobs that failed, so check the
    # systems' own counters. Sidekiq writes its counters when it exits,
    # hence after stop_worker.
    def verify_processed(system, jobs)
      processed_key, failed_key = system == :sidekiq ? %w[stat:processed stat:failed] : %w[solid_jobs:metric:processed solid_jobs:metric:failed]
      processed = @redis.get(processed_key).to_i
      failed = @redis.get(failed_key).to_i
      return if processed == jobs && failed.zero?

      raise Failure, "#{processed_key}=#{processed} (expected #{jobs}), #{failed_key}=#{failed} (expected 0)"
    end

    def failure_message(error, worker)
      message = "#{error.class}: #{error.message}"
      return message unless worker

      "#{message}\nworker: #{worker.description}\nworker output (last lines):\n#{worker.log_tail}"
    end

    def publish(results)
      report = Report.new(results)
      body = [report.table, "", "Targets:", *report.target_lines.map { |l| "- #{l}" }, "",
              "Redis commands per job, busiest first (commands run inside Lua scripts count too; " \
              "the window includes worker boot):", *report.command_mix].join("\n")
      puts "", body
      write_results(body) if @settings.output
    end

    def write_results(body)
      FileUtils.mkdir_p(File.dirname(@settings.output))
      temporary = "#{@settings.output}.tmp"
      File.write(temporary, "# Throughput: SolidJobs vs Sidekiq\n\n#{environment_line}\n\n#{workload_line}\n\n#{body}\n")
      File.rename(temporary, @settings.output)
      puts "", "Wrote #{@settings.output}"
    end

    def environment_line
      "CPU: #{cpu_model} | nproc: #{Etc.nprocessors} | Ruby: #{RUBY_VERSION}p#{RUBY_PATCHLEVEL} | " \
        "Redis: #{@redis.info("server")["redis_version"]} | commit: #{git_commit} | Sidekiq: #{Sidekiq::VERSION} | " \
        "SolidJobs: #{SolidJobs::VERSION} | load average at start: #{@load_at_start}"
    end

    def load_average
      File.read("/proc/loadavg").split.first(3).join(" ")
    rescue SystemCallError
      "unknown"
    end

    def workload_line
      "Jobs per case: #{@settings.noop_jobs} noop, #{@settings.cpu_jobs} cpu (#{@cpu_iterations} iterations, " \
        "#{format("%.2f", @cpu_job_ms)} ms each when calibrated). Run at #{Time.now.utc.strftime("%Y-%m-%d %H:%M UTC")}."
    end

    def cpu_model
      line = File.foreach("/proc/cpuinfo").find { |l| l.start_with?("model name") }
      line ? line.split(":", 2).last.strip : "unknown"
    rescue SystemCallError
      "unknown"
    end

    def git_commit
      commit = IO.popen(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], err: File::NULL, &:read).strip
      commit.empty? ? "unknown" : commit
    rescue SystemCallError
      "unknown"
    end
  end
end

exit Bench::Throughput.main(ENV) if $PROGRAM_NAME == __FILE__
