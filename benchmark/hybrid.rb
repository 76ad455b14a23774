# frozen_string_literal: true

# Hybrid benchmark: the Ractor path next to the warm pool's IPC path, on one
# `solid-jobs` node (2 worker Ractors; for the warm path also 2 thread
# workers, which run the executor) and 2 warm workers (script/warm_worker.rb),
# against a private Redis. The Ractor path runs without thread workers, so
# none of its tasks overflows onto a thread.
#
#   bundle exec rake benchmark:hybrid
#   BENCH_SMOKE=1 bundle exec rake benchmark:hybrid   # seconds, for tests
#
# Modes, each run once per path on a fresh node:
#   transport  zero-work jobs, paced
#   sustained  jobs spread over BENCH_SECONDS, BENCH_WORK_MS of CPU each
#   burst      jobs enqueued at once, BENCH_WORK_MS of CPU each
#
# Environment (defaults in parentheses):
#   BENCH_JOBS              transport=N (1000), sustained=N (10000), burst=N (2000)
#   BENCH_RATE              transport jobs per second (200)
#   BENCH_SECONDS           the sustained mode's length (30)
#   BENCH_WORK_MS           CPU milliseconds per sustained and burst job (5)
#   SOLID_JOBS_WARM_WORKERS warm workers (2)
#   BENCH_SMOKE=1           tiny sizes
#   BENCH_OUTPUT_DIR        where hybrid.{json,md} go (benchmark/results; nowhere in a smoke run)
#
# Reported per run: jobs/s and enqueue-to-finish latency p50/p95/p99; for
# the warm path also the IPC round trip (socket round trip measured by the
# executor, the task's work included) and how many round trips timed out
# or were refused.

require_relative "support/systems"
require "json"

ENV["SOLID_JOBS_WARM_WORKERS"] ||= "2"
require_relative "hybrid_jobs"

module Bench
  class Hybrid < Harness
    JOBS_FILE = "./benchmark/hybrid_jobs.rb"
    RACTOR_WORKERS = 2
    PATHS = %w[ractor warm].freeze
    BOOT_TIMEOUT = 60

    def initialize(settings)
      super
      @warm_workers = Integer(ENV["SOLID_JOBS_WARM_WORKERS"])
      work_ms = settings.integer("BENCH_WORK_MS", @smoke ? 1 : 5)
      jobs = settings.per_kind("BENCH_JOBS", @smoke ? {"transport" => 40, "sustained" => 60, "burst" => 60} :
                                                      {"transport" => 1000, "sustained" => 10_000, "burst" => 2000})
      @modes = {"transport" => {jobs: jobs["transport"], rate: settings.integer("BENCH_RATE", 200), work_ms: 0},
                "sustained" => {jobs: jobs["sustained"], seconds: settings.integer("BENCH_SECONDS", @smoke ? 1 : 30),
                                work_ms: work_ms},
                "burst" => {jobs: jobs["burst"], work_ms: work_ms}}
    end

    private

    def measure
      ENV["SOLID_JOBS_WARM_SOCKET_DIR"] = File.join(@lab.dir, "sockets").tap { |dir| FileUtils.mkdir_p(dir) }
      SolidJobs::WarmPool.assume_rails = true # the warm pool's rule needs Rails; this benchmark has none
      warm = start_warm_workers
      results = @modes.flat_map do |mode, spec|
        PATHS.map { |path| run_case(mode, spec, path).tap { |r| warn("#{mode} #{path}: #{r.to_json}") } }
      end
      report(results)
      true
    ensure
      warm&.each(&:stop)
    end

    def start_warm_workers
      app = File.join(@lab.dir, "app")
      FileUtils.mkdir_p(File.join(app, "config"))
      File.write(File.join(app, "config", "environment.rb"),
                 "require #{File.join(ROOT, "benchmark", "hybrid_jobs.rb").inspect}\n")
      Array.new(@warm_workers) do |id|
        # The warm worker finds its app in the directory it is started in.
        worker = ChildProcess.new([RbConfig.ruby, File.join(ROOT, "script", "warm_worker.rb"), id.to_s],
                                  chdir: app, log: File.join(@lab.dir, "warm-#{id}.log"), children: @lab.children).start
        wait_for("warm worker #{id}", BOOT_TIMEOUT) { File.socket?(SolidJobs::WarmPool.socket_path(id)) }
        worker
      end
    end

    def run_case(mode, spec, path)
      dir = File.join(@lab.dir, "#{mode}-#{path}")
      FileUtils.mkdir_p(dir)
      system = Bench.system("solid-jobs")
      system.prepare(@lab)
      roundtrips = File.join(dir, "roundtrips.json")
      workers = system.start_workers(RACTOR_WORKERS, jobs_file: JOBS_FILE, env: {"BENCH_ROUNDTRIPS_FILE" => roundtrips},
                                                     args: ["--thread-concurrency", (path == "warm" ? @warm_workers : 0).to_s])
      wait_for("node start (#{workers.log_tail})", BOOT_TIMEOUT) do
        @lab.redis.scard("#{SolidJobs.config.namespace}:nodes").positive?
      end
      started = now_ms
      produce(mode, spec, path, dir)
      budget = 120 + spec[:jobs] * (spec[:work_ms] + 5) / 1000.0
      wait_for("#{spec[:jobs]} #{path} jobs (#{mode})", budget) { finished_lines(dir, path).size >= spec[:jobs] }
      workers.stop!
      lines = finished_lines(dir, path).map { |l| l.split.map(&:to_f) }
      raise Failure, "#{path} #{mode}: #{lines.size} jobs finished, expected #{spec[:jobs]}" unless lines.size == spec[:jobs]

      result = {"mode" => mode, "path" => path, "jobs" => spec[:jobs], "work_ms" => spec[:work_ms],
                "jobs_per_s" => (spec[:jobs] * 1000.0 / [lines.map(&:last).max - started, 1].max).round(1),
                "latency_ms" => summary(lines.map { |_, enqueued, done| done - enqueued })}
      if path == "warm"
        stats = JSON.parse(File.read(roundtrips))
        result["ipc_roundtrip_ms"] = summary(stats["samples_ms"])
        result["exhausted"] = stats["stats"].slice("timeouts", "refused")
      end
      result
    ensure
      workers&.stop
    end

    def now_ms = Process.clock_gettime(Process::CLOCK_REALTIME, :float_millisecond).round(3)

    # Enqueues the mode's jobs for one path, paced as the mode says.
    def produce(mode, spec, path, dir)
      warm_classes = HybridWarmTask.for_workers(@warm_workers)
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

    def finished_lines(dir, path) = Dir[File.join(dir, "#{path}-*.log")].flat_map { |f| File.readlines(f) }

    def wait_for(what, seconds)
      deadline = Bench.now + seconds
      until yield
        raise Failure, "timed out after #{seconds.round}s waiting for #{what}" if Bench.now > deadline

        sleep 0.05
      end
    end

    # Nearest rank on the sorted values, in milliseconds.
    def summary(values)
      sorted = values.sort
      rank = ->(pct) { sorted.empty? ? nil : sorted[((sorted.size - 1) * pct / 100.0).round].round(2) }
      {"p50" => rank.(50), "p95" => rank.(95), "p99" => rank.(99), "max" => sorted.last&.round(2)}
    end

    def report(results)
      rows = results.map do |r|
        ipc = r["ipc_roundtrip_ms"]
        [r["mode"], r["path"], r["jobs"], r["work_ms"], r["jobs_per_s"], *r["latency_ms"].values_at("p50", "p95", "p99"),
         *(ipc ? ipc.values_at("p50", "p95", "p99") : %w[- - -]), r["exhausted"] ? r["exhausted"].values.sum : "-"]
      end
      table = Bench.table(["Mode", "Path", "Jobs", "Work ms", "Jobs/s", "Latency p50 ms", "p95", "p99",
                           "IPC round trip p50 ms", "p95", "p99", "Exhausted"], rows)
      setup = "#{RACTOR_WORKERS} worker Ractors, #{@warm_workers} thread workers (warm path only), " \
              "#{@warm_workers} warm workers" \
              "#{@smoke ? "; BENCH_SMOKE sizes" : ""}. Run at #{run_time}; generated by `bundle exec rake benchmark:hybrid`."
      publish("hybrid", title: "Hybrid: Ractor path vs warm pool (IPC)", body: table,
                        intro: "#{setup}\n\nLatency: enqueue to the task's end, wall clock. " \
                               "IPC round trip: the executor's socket round trip to the warm worker, the task's work included. " \
                               "Exhausted: round trips that timed out or were refused.")
      dir = @settings.output_dir or return
      Bench.write_file(File.join(dir, "hybrid.json"), JSON.pretty_generate("header" => header, "results" => results))
      puts "Wrote #{File.join(dir, "hybrid.json")}"
    end
  end
end

exit Bench::Hybrid.main if $PROGRAM_NAME == __FILE__
