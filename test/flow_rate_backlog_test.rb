# frozen_string_literal: true

require_relative "test_helper"

# A deep backlog of rate limited no-op jobs, every key far under its rate
# (1,000 keys at 100 starts per second, 30 jobs each), on one node with 8
# workers (docs/flow-control.md, "Starts, not claims: the slack").
#
# The adaptive prefetch window is sized from the task bodies' duration (10
# ms of *work* per worker, up to 2,048 jobs), not from how fast the node
# starts jobs, so for no-op jobs its tail waited longer than the default
# start slack (per / 20 = 50 ms) on a loaded 2-core host. Those jobs were
# handed back one `requeue.lua` round trip each, by the worker that took
# them, which made every later job of the window later still: the node
# livelocked handing back what it claimed (16 of 50,000 jobs processed in
# 20 s; this test failed 4 runs of 5). While rate limited jobs flow the
# window is now also capped by the waits their starts see
# (crates/solid_core/src/prefetch.rs, RateCap). No job was lost and no rate
# exceeded either way.
class FlowRateBacklogTest < SolidJobsTest
  JOBS = 30_000
  KEYS = 1000

  def processed = redis.get(key("metric:processed")).to_i

  def teardown
    @worker&.kill!
    super
  end

  def test_a_backlog_of_keys_under_their_rate_drains_without_handing_jobs_back
    FlowRateSpreadTask.enqueue_many(Array.new(JOBS) { |n| ["k#{n % KEYS}", n] })
    @worker = WorkerProcess.new(redis_url: REDIS.url, namespace: @namespace, log: File.join(@ledger_dir, "worker.log"),
                                args: ["--concurrency", "8", "--channel", "spread"]).start
    # Unlimited, the same jobs drain in about a second here; the rate allows
    # 100,000 starts per second. The bound only keeps a broken build from
    # hanging.
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 60
    # Polled (not `eventually`) so that a stall fails with the figures below.
    sleep 0.1 until processed >= JOBS || Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline
    assert_equal JOBS, processed, "the backlog stalled: #{redis.get(key("metric:handed_back")).to_i} jobs handed back " \
                                  "unstarted so far\n#{@worker.log_tail(5)}"
    assert_equal 0, redis.get(key("metric:throttled")).to_i, "no key ever reached its rate"
    # How many are handed back depends on how much CPU the host leaves the
    # node (none on a quiet host; 934 of 30,000 beside a build; 2,279 with
    # two busy loops, a compiler and the rest of the suite beside it), so no
    # bound on it is a property of the code. The livelock's shape is: every
    # job handed back, most of them many times over, and the backlog never
    # drained (the assertion above).
    handed_back = redis.get(key("metric:handed_back")).to_i
    assert_operator handed_back, :<, JOBS, "#{handed_back} jobs were handed back unstarted: more hand-backs than jobs " \
                                           "is the livelock (the prefetch window outlasting the start slack)"
  end
end
