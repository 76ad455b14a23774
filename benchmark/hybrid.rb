# frozen_string_literal: true

# Hybrid benchmark: the Ractor path next to the warm pool's IPC path, on one
# `solid-jobs` node (2 worker Ractors; for the warm path also 2 thread
# workers, which run the executor) and 2 warm workers (script/warm_worker.rb),
# against a private Redis. The Ractor path runs without thread workers, so
# none of its tasks overflows onto a thread.
#
#   transport  zero-work jobs, paced (TRANSPORT_JOBS at TRANSPORT_RATE/s)
#   sustained  SUSTAINED_JOBS over SUSTAINED_SECONDS, WORK_MS of CPU each
#   burst      BURST_JOBS enqueued at once, WORK_MS of CPU each
#
# Each mode runs once per path, on a fresh node. Reported per run: jobs/s and
# enqueue-to-finish latency p50/p95/p99; for the warm path also the IPC round
# trip (socket round trip measured by the executor, the task's work
# included) and how many round trips timed out or were refused. Results go
# to benchmark/results/hybrid.{json,md}. BENCH_SMOKE=1: tiny sizes, results
# in a temporary directory unless HYBRID_RESULTS_DIR is set.

$LOAD_PATH.unshift(File.expand_path("../lib", __dir__))
require "json"
require "tmpdir"
require "fileutils"
require_relative "support/common"
require_relative "support/child_group"
require_relative "support/redis_server"
require_relative "support/worker_process"
require_relative "support/markdown"
require_relative "support/environment"

ENV["SOLID_JOBS_WARM_WORKERS"] ||= "2"
require_relative "hybrid_jobs"

module Hybrid
  ROOT = File.expand_path("..", __dir__)
  SMOKE = ENV["BENCH_SMOKE"] == "1"
  WARM_WORKERS = Integer(ENV["SOLID_JOBS_WARM_WORKERS"])
  RACTOR_WORKERS = 2
  THREAD_WORKERS = WARM_WORKERS
  WORK_MS = Integer(ENV.fetch("WORK_MS", SMOKE ? "1" : "5"))
  MODES = {
    "transport" => {jobs: Bench.positive_integer(ENV, "TRANSPORT_JOBS", SMOKE ? 40 : 1_000),
                    rate: Bench.positive_integer(ENV, "TRANSPORT_RATE", 200), work_ms: 0},
    "sustained" => {jobs: Bench.positive_integer(ENV, "SUSTAINED_JOBS", SMOKE ? 60 : 10_000),
                    seconds: Bench.positive_integer(ENV, "SUSTAINED_SECONDS", SMOKE ? 1 : 30), work_ms: WORK_MS},
    "burst" => {jobs: Bench.positive_integer(ENV, "BURST_JOBS", SMOKE ? 60 : 2_000), work_ms: WORK_MS}
  }.freeze
  PATHS = %w[ractor warm].freeze

  module_function

  def now_ms = Process.clock_gettime(Process::CLOCK_REALTIME, :float_millisecond).round(3)

  def percentile(sorted, pct)
    return nil if sorted.empty?

    sorted[((sorted.size - 1) * pct / 100.0).round].round(2)
  end

  def summary(values)
    sorted = values.sort
    {"p50" => percentile(sorted, 50), "p95" => percentile(sorted, 95), "p99" => percentile(sorted, 99), "max" => sorted.last&.round(2)}
  end

  # Enqueues the mode's jobs for one path, paced as the mode says.
  def produce(mode, spec, path, dir)
    warm_classes = HybridWarmTask.for_workers(WARM_WORKERS)
    klass_for = ->(seq) { path == "ractor" ? HybridRactorTask : warm_classes[seq % warm_classes.size] }
    jobs = spec[:jobs]
    if mode == "burst"
      jobs.times.group_by { |seq| klass_for.(seq) }.each do |klass, seqs|
        seqs.each_slice(1_000) { |slice| klass.enqueue_many(slice.map { |seq| [seq, now_ms, spec[:work_ms], +dir] }) }
      end
      return
    end

    interval = mode == "transport" ? 1.0 / spec[:rate] : spec[:seconds].to_f / jobs
    started = Bench.now
    jobs.times do |seq|
      delay = started + seq * interval - Bench.now
      sleep(delay) if delay.positive?
      klass_for.(seq).enqueue(seq, now_ms, spec[:work_ms], +dir) # +dir: a non-shareable argument
    end
  end

  def finished_lines(dir, path)
    Dir[File.join(dir, "#{path}-*.log")].flat_map { |f| File.readlines(f) }
  end

  def run_case(children, redis, mode, spec, path, work_dir, socket_dir)
    dir = File.join(work_dir, "#{mode}-#{path}")
    FileUtils.mkdir_p(dir)
    SolidJobs.client.call(["FLUSHDB"])
    roundtrips_file = File.join(dir, "roundtrips.json")
    env = {"SOLID_JOBS_WARM_SOCKET_DIR" => socket_dir, "SOLID_JOBS_WARM_WORKERS" => WARM_WORKERS.to_s,
           "HYBRID_ROUNDTRIPS_FILE" => roundtrips_file}
    log = File.join(dir, "worker.log")
    command = [RbConfig.ruby, "-Ilib", "exe/solid-jobs", "--require", "./benchmark/hybrid_jobs.rb",
               "--concurrency", RACTOR_WORKERS.to_s, "--thread-concurrency", (path == "warm" ? THREAD_WORKERS : 0).to_s,
               "--channel", "hybrid", "--redis-url", redis.url]
    worker = Bench::WorkerProcess.new(children, command, env, log).start
    nodes = "#{SolidJobs.config.namespace}:nodes"
    wait_for("node start (#{log})", 60) { SolidJobs.client.call(["SCARD", nodes]).to_i.positive? }
    started = now_ms
    produce(mode, spec, path, dir)
    budget = 120 + spec[:jobs] * (spec[:work_ms] + 5) / 1000.0
    wait_for("#{spec[:jobs]} #{path} jobs (#{mode})", budget) { finished_lines(dir, path).size >= spec[:jobs] }
    worker.stop or raise Bench::Failure, "worker did not stop: #{worker.log_tail}"
    lines = finished_lines(dir, path).map { |l| l.split.map(&:to_f) }
    raise Bench::Failure, "#{path} #{mode}: #{lines.size} jobs finished, expected #{spec[:jobs]}" unless lines.size == spec[:jobs]

    finished = lines.map(&:last).max
    result = {"mode" => mode, "path" => path, "jobs" => spec[:jobs], "work_ms" => spec[:work_ms],
              "jobs_per_s" => (spec[:jobs] * 1000.0 / [finished - started, 1].max).round(1),
              "latency_ms" => summary(lines.map { |_, enqueued, done| done - enqueued })}
    if path == "warm"
      roundtrips = JSON.parse(File.read(roundtrips_file))
      result["ipc_roundtrip_ms"] = summary(roundtrips["samples_ms"])
      result["exhausted"] = roundtrips["stats"].slice("timeouts", "refused")
    end
    result
  end

  def wait_for(what, seconds)
    deadline = Bench.now + seconds
    until yield
      raise Bench::Failure, "timed out after #{seconds.round}s waiting for #{what}" if Bench.now > deadline

      sleep 0.05
    end
  end

  def start_warm_workers(children, app_dir, socket_dir, log_dir)
    FileUtils.mkdir_p(File.join(app_dir, "config"))
    File.write(File.join(app_dir, "config", "environment.rb"), "require #{File.join(ROOT, "benchmark", "hybrid_jobs.rb").inspect}\n")
    env = {"SOLID_JOBS_WARM_SOCKET_DIR" => socket_dir, "SOLID_JOBS_WARM_WORKERS" => WARM_WORKERS.to_s}
    WARM_WORKERS.times.map do |id|
      log = File.join(log_dir, "warm-#{id}.log")
      pid = children.spawn(env, RbConfig.ruby, File.join(ROOT, "script", "warm_worker.rb"), id.to_s,
                           chdir: app_dir, in: File::NULL, out: log, err: [:child, :out])
      wait_for("warm worker #{id}", 60) { File.socket?(SolidJobs::WarmPool.socket_path(id)) }
      pid
    end
  end

  def markdown(results, header)
    rows = results.map do |r|
      ipc = r["ipc_roundtrip_ms"]
      [r["mode"], r["path"], r["jobs"], r["work_ms"], r["jobs_per_s"], *r["latency_ms"].values_at("p50", "p95", "p99"),
       *(ipc ? ipc.values_at("p50", "p95", "p99") : %w[- - -]),
       r["exhausted"] ? r["exhausted"].values.sum : "-"]
    end
    table = Bench::Markdown.table(["Mode", "Path", "Jobs", "Work ms", "Jobs/s", "Latency p50 ms", "p95", "p99",
                                   "IPC round trip p50 ms", "p95", "p99", "Exhausted"], rows)
    <<~MD
      # Hybrid: Ractor path vs warm pool (IPC)

      #{header}

      Latency: enqueue to the task's end, wall clock. IPC round trip: the
      executor's socket round trip to the warm worker, the task's work
      included. Exhausted: round trips that timed out or were refused.

      #{table}
    MD
  end

  def run
    children = Bench::ChildGroup.new
    work_dir = Dir.mktmpdir("solid-jobs-hybrid")
    socket_dir = Dir.mktmpdir("sjh")
    ENV["SOLID_JOBS_WARM_SOCKET_DIR"] = socket_dir
    redis = Bench::RedisServer.new(children).start
    SolidJobs.configure { |c| c.redis_url = redis.url }
    SolidJobs::WarmPool.assume_rails = true # the warm pool's rule needs Rails; this benchmark has none
    warm_pids = start_warm_workers(children, File.join(work_dir, "app"), socket_dir, work_dir)
    results = MODES.flat_map do |mode, spec|
      PATHS.map do |path|
        run_case(children, redis, mode, spec, path, work_dir, socket_dir).tap { |r| warn("#{mode} #{path}: #{r.to_json}") }
      end
    end
    header = "Ruby #{Bench::Environment.ruby}, #{Bench::Environment.nproc} CPU(s) (#{Bench::Environment.cpu_model}), " \
             "load #{Bench::Environment.load_average}, commit #{Bench::Environment.git_commit}" \
             "#{Bench::Environment.code_modified? ? " (modified)" : ""}; #{RACTOR_WORKERS} worker Ractors, " \
             "#{THREAD_WORKERS} thread workers (warm path only), #{WARM_WORKERS} warm workers#{SMOKE ? "; BENCH_SMOKE sizes" : ""}."
    out_dir = ENV["HYBRID_RESULTS_DIR"] || (SMOKE ? File.join(work_dir, "results") : File.join(ROOT, "benchmark", "results"))
    FileUtils.mkdir_p(out_dir)
    report = markdown(results, header)
    File.write(File.join(out_dir, "hybrid.json"), JSON.pretty_generate("header" => header, "results" => results))
    File.write(File.join(out_dir, "hybrid.md"), report)
    puts report
    puts "\nWrote #{File.join(out_dir, "hybrid.json")} and hybrid.md#{out_dir.start_with?(work_dir) ? " (temporary)" : ""}"
  ensure
    warm_pids&.each do |pid|
      Process.kill("TERM", pid)
      Bench.wait_for_exit(pid, 10) || Bench.kill_child(pid)
    rescue Errno::ESRCH
      nil
    end
    redis&.stop
    children&.close
    FileUtils.rm_rf(socket_dir) if socket_dir
    FileUtils.rm_rf(work_dir) if work_dir && !ENV["HYBRID_KEEP"] # HYBRID_KEEP=1 keeps logs and ledgers
  end
end

Hybrid.run if $PROGRAM_NAME == __FILE__
