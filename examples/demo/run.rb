# frozen_string_literal: true

# The demo behind bin/demo: a private Redis, a batch of no-op and CPU-bound
# tasks, one `solid-jobs` worker process at concurrency 2, a progress line,
# and a final throughput line. Everything it starts, it stops.
$LOAD_PATH.unshift(File.expand_path("../../lib", __dir__))
require "solid_jobs"
require "tmpdir"
require_relative "tasks"
require_relative "../../test/support/processes/redis_server"

NOOP_JOBS = Integer(ENV.fetch("DEMO_NOOP_JOBS", 20_000))
CPU_JOBS = Integer(ENV.fetch("DEMO_CPU_JOBS", 400))
FIB_N = 20 # about 3 ms of pure Ruby on this class of machine
ROOT = File.expand_path("../..", __dir__)

def monotonic = Process.clock_gettime(Process::CLOCK_MONOTONIC)

redis = RedisServer.new.start
dir = Dir.mktmpdir("solid-jobs-demo")
ledger = File.join(dir, "ledger")
worker = nil
begin
  SolidJobs.configure { |c| c.redis_url = redis.url }
  client = SolidJobs.client
  puts "Redis on port #{redis.port}; enqueueing #{NOOP_JOBS} no-op and #{CPU_JOBS} CPU-bound (fib(#{FIB_N})) tasks"
  NOOP_JOBS.times.each_slice(1000) { |slice| NoopTask.enqueue_many(slice.map { |i| [i] }) }
  FibonacciTask.enqueue_many(Array.new(CPU_JOBS) { [FIB_N, ledger] })
  total = NOOP_JOBS + CPU_JOBS

  worker = Process.spawn(RbConfig.ruby, File.join(ROOT, "exe/solid-jobs"), "--require", File.join(__dir__, "tasks.rb"),
                         "--concurrency", "2", "--redis-url", redis.url, "--channel", "default")
  started = nil
  first = 0
  processed = 0
  deadline = monotonic + 300
  while processed < total
    raise "demo timed out" if monotonic > deadline

    sleep 0.1
    processed = client.call(["GET", "solid_jobs:metric:processed"]).to_i
    if processed.positive? && started.nil?
      started = monotonic
      first = processed
    end
    rate = started && monotonic - started > 0.05 ? ((processed - first) / (monotonic - started)).round : 0
    print "\r  processed #{processed}/#{total}  (#{rate} jobs/s)   "
  end
  # Throughput counts the jobs finished after the first poll that saw work
  # begin, over the time since that poll: worker boot is excluded.
  elapsed = monotonic - started
  puts
  by_ractor = File.readlines(ledger, chomp: true).tally.sort.map { |name, n| "#{name}: #{n}" }.join(", ")
  puts format("done: %d jobs; throughput %d jobs/s; CPU-bound tasks per worker Ractor: %s",
              total, (total - first) / elapsed, by_ractor)
ensure
  if worker
    Process.kill("TERM", worker)
    Process.wait(worker)
  end
  redis.cleanup
  FileUtils.rm_rf(dir)
end
