# frozen_string_literal: true

require_relative "test_helper"
require_relative "support/fake_time"
require_relative "support/recurring_helpers"

# The recurring scheduler under faults of the node's clock and of Redis'
# memory, with real worker processes running `every: 1`:
# - the node's wall clock stepped back or forward an hour while it runs
#   (libfaketime reading its offset from a file the test rewrites; the
#   monotonic and boot-time clocks stay real, as under NTP or an operator);
# - Redis restarted from an older RDB (what a crash under appendfsync
#   everysec, a failover to a lagging replica or a restore does): it forgot
#   the last decisions and the jobs written with them.
class RecurringFaultsTest < SolidJobsTest
  include RecurringHelpers

  def test_a_wall_clock_stepped_back_an_hour_stops_no_tick
    stepped_wall_clock("-1h")
  end

  def test_a_wall_clock_stepped_forward_an_hour_enqueues_nothing_early_or_twice
    stepped_wall_clock("+1h")
  end

  def stepped_wall_clock(offset)
    skip "libfaketime is not installed (bin/setup installs the faketime package)" unless FakeTime.available?

    file = File.join(@ledger_dir, "faketime")
    node = worker("stepped", env: FakeTime.stepping_env(file))
    eventually("three ticks before the step", timeout: 60) { jobs_by_tick.size >= 3 }
    FakeTime.step(file, offset)
    stepped_at = redis_now_ms
    # Six ticks due after the step (the node reads the new offset within a second).
    eventually("six ticks after the step", timeout: 30) { jobs_by_tick.keys.count { |t| t > stepped_at } >= 6 }
    # Two readings of Redis' clock: the node enqueues until it has exited,
    # so "nothing early" compares with the reading after the exit (CI once
    # saw the tick due 7 ms after a reading taken before TERM), and "kept
    # enqueueing" with the one before TERM.
    stopping_at = redis_now_ms
    node.stop("TERM")
    stopped_at = redis_now_ms
    by_tick = jobs_by_tick
    assert_once_per_tick(by_tick, "wall clock stepped #{offset}")
    assert_empty gaps(by_tick), "ticks missed after the wall clock stepped #{offset}"
    assert_operator by_tick.keys.max, :<=, stopped_at, "no tick enqueued before Redis' clock reached it"
    # The node kept enqueueing after the step, to the end of the run.
    assert_operator by_tick.keys.max, :>=, stopping_at - 2000,
                    "the node stopped enqueueing when its wall clock stepped #{offset} " \
                    "(last tick #{by_tick.keys.max}, stepped at #{stepped_at}, TERM at #{stopping_at})"
    assert_operator by_tick.keys.count { |t| t > stepped_at }, :>=, 4
  end

  def test_a_redis_restored_from_an_older_snapshot_gets_its_ticks_once_each_and_the_nodes_warn
    server = RedisServer.new(appendonly: false).start
    client = Redis.new(url: server.url)
    nodes = Array.new(2) { |i| worker("node-#{i}", url: server.url) }
    eventually("ticks flow", timeout: 30) { jobs_by_tick(client).size >= 2 }
    # The snapshot, with the nodes paused so what it holds is known.
    nodes.each(&:pause)
    snapshot = jobs_by_tick(client)
    saved = client.lastsave
    client.bgsave
    eventually("the snapshot is written", timeout: 10) { client.lastsave != saved }
    nodes.each(&:resume)
    # Ticks decided and enqueued after the snapshot: Redis will forget them.
    eventually("three ticks after the snapshot", timeout: 30) { (jobs_by_tick(client).keys - snapshot.keys).size >= 3 }
    remembered = jobs_by_tick(client)
    server.kill! # a crash: nothing written since the snapshot survives
    server.start
    forgotten = remembered.keys - snapshot.keys
    refute_empty forgotten
    eventually("ticks flow again", timeout: 30) { jobs_by_tick(client).keys.count { |t| t > forgotten.max } >= 3 }
    @workers.each { |w| w.stop("TERM") }

    by_tick = jobs_by_tick(client)
    assert_once_per_tick(by_tick, "after a restore from an older snapshot")
    assert_equal snapshot, by_tick.slice(*snapshot.keys), "the snapshot's jobs, as they were"
    # No burst: of the forgotten ticks only the latest may be proposed
    # (and enqueued) again, once.
    again = forgotten & by_tick.keys
    assert_empty again - [forgotten.max], "forgotten ticks enqueued again: #{again} of #{forgotten}"
    assert_empty gaps(by_tick.select { |t, _| t > forgotten.max }), "ticks missed after the restart"
    warned = @workers.select { |w| File.read(w.log).include?("recurring schedule probe: Redis forgot decided ticks") }
    refute_empty warned, "a node that saw the forgotten decisions logged the rollback"
  ensure
    server&.cleanup
  end
end
