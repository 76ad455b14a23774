# frozen_string_literal: true

# The hybrid benchmark's tasks (benchmark/hybrid.rb), on the benchmarks'
# one channel. Loaded by the
# `solid-jobs` worker (--require), by the warm workers (through their app's
# config/environment.rb) and by the benchmark itself, which enqueues.
require "json"
require "solid_jobs"

module HybridWork
  module_function

  # `ms` milliseconds of CPU time (the thread's own clock, so a busy host
  # stretches the wall time, not the work).
  def spin(ms)
    return if ms <= 0

    stop = Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID) + ms / 1000.0
    x = 0
    x += 1 while Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID) < stop
    x
  end

  # One line per job: sequence number, enqueued and finished (ms since the
  # epoch, to the microsecond); one append per line, so concurrent writers
  # do not interleave.
  def record(dir, path_name, seq, enqueued_ms)
    done_ms = Process.clock_gettime(Process::CLOCK_REALTIME, :float_millisecond)
    File.open(File.join(dir, "#{path_name}-#{Process.pid}.log"), "a") do |f|
      f.write(format("%d %.3f %.3f\n", seq, enqueued_ms, done_ms))
    end
  end
end

# Ractor-safe: runs in a worker Ractor.
class HybridRactorTask
  include SolidJobs::Task
  task_options channel: "bench", max_failures: 1

  def execute_task(seq, enqueued_ms, work_ms, dir)
    HybridWork.spin(work_ms)
    HybridWork.record(dir, "ractor", seq, enqueued_ms)
  end
end

# Holds a Mutex in a class-level instance variable: with Rails (assumed by
# the benchmark) and a non-shareable argument, its jobs go to the warm pool.
class HybridWarmTask
  include SolidJobs::Task
  task_options channel: "bench", max_failures: 1

  @lock = Mutex.new
  class << self
    attr_reader :lock

    # One subclass per warm worker: tasks are spread by crc32(name) % workers,
    # so a single task name would use a single warm worker.
    def for_workers(count)
      (0...count).map do |worker|
        name = (0..).lazy.map { |i| "HybridWarmTask#{i}" }.find { |n| Zlib.crc32(n) % count == worker }
        Object.const_defined?(name) ? Object.const_get(name) : Object.const_set(name, Class.new(self))
      end
    end
  end

  def execute_task(seq, enqueued_ms, work_ms, dir)
    HybridWork.spin(work_ms)
    HybridWork.record(dir, "warm", seq, enqueued_ms)
  end
end

# The warm workers run HybridWarmTask<N> by name: define them here too.
HybridWarmTask.for_workers(Integer(ENV.fetch("SOLID_JOBS_WARM_WORKERS", "1")))

# In the worker process: hand the executor's round-trip times to the
# benchmark when the node stops.
if (file = ENV["BENCH_ROUNDTRIPS_FILE"])
  at_exit do
    keeper = SolidJobs::WarmPool.stats_keeper
    File.write(file, JSON.generate("samples_ms" => keeper.samples.map { |s| (s * 1000).round(3) }, "stats" => keeper.to_h))
  end
end
