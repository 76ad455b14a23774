# frozen_string_literal: true

require_relative "test_helper"
require_relative "support/fault_proxy"

# The adaptive prefetch window covers the claim round trip: a worker 20 ms
# away from Redis (each way, through a real proxy) runs near the rate of a
# neighbour next to it on the same backlog, instead of letting its workers
# wait for every refill. Real worker processes, real latency.
class PrefetchLatencyTest < SolidJobsTest
  JOB_MS = 20
  # Seconds of steady state measured, after both workers ran a few jobs
  # (the window learns the job duration and the round trip from them).
  MEASURE = 2.5

  def setup
    super
    @workers = []
    @proxy = FaultProxy.new(REDIS.port).start
  end

  def teardown
    @workers.each do |w|
      w.signal("KILL")
      w.wait(timeout: 5)
    end
    @proxy.close
    super
  end

  def worker(url, name)
    log = File.join(@ledger_dir, "#{name}.log")
    w = WorkerProcess.new(redis_url: url, namespace: @namespace, log: log, args: %w[--concurrency 2]).start
    (@workers << w).last
  end

  def done(worker)
    path = File.join(@ledger_dir, "ledger-#{worker.pid}")
    File.exist?(path) ? File.foreach(path).count : 0
  end

  def test_a_worker_behind_latency_runs_near_its_neighbours_rate
    @proxy.delay = 0.02
    # More than both can run while measured: the backlog never runs out.
    TortureTask.enqueue_many(Array.new(2_000) { |i| [i, @ledger_dir, JOB_MS] })
    near = worker(REDIS.url, "near")
    far = worker(@proxy.url, "far")
    eventually("both workers warmed up", timeout: 30) { done(near) >= 20 && done(far) >= 20 }

    before = [done(near), done(far)]
    sleep MEASURE
    near_rate, far_rate = [done(near), done(far)].zip(before).map { |after, start| (after - start) / MEASURE }

    assert_operator redis.llen(key("channel:default")), :>, 0, "the backlog lasted the whole measurement"
    assert_operator near_rate, :>, 0
    assert_operator far_rate / near_rate, :>=, 0.75,
                    format("far %.1f jobs/s vs near %.1f jobs/s: the far worker waits for its refills", far_rate, near_rate)
  end
end
