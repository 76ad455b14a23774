# frozen_string_literal: true

require_relative "test_helper"
require_relative "support/fake_time"
require_relative "support/recurring_helpers"

# Recurring schedules with real worker processes: every node runs the
# scheduler, and each tick of `every: 1` is enqueued exactly once through
# SIGKILLs and restarts of nodes, a restart of Redis (AOF), and nodes whose
# clocks are skewed. The jobs go to a channel the nodes do not serve, so
# they stay in its list to be counted by their meta tick.
#
# SOLID_JOBS_RECURRING_SECONDS sets how long the five-node run lasts
# (default 12; the torture run and the 3-minute proof use 180).
class RecurringTest < SolidJobsTest
  include RecurringHelpers

  SECONDS = Float(ENV.fetch("SOLID_JOBS_RECURRING_SECONDS", "12"))

  def test_five_nodes_enqueue_each_tick_once_while_nodes_are_sigkilled_and_restarted
    five_nodes_once_per_tick({})
  end

  # The same with a six-field cron spec firing every second.
  def test_five_nodes_enqueue_each_cron_tick_once_while_nodes_are_sigkilled_and_restarted
    five_nodes_once_per_tick("SOLID_JOBS_TEST_RECURRING_CRON" => "* * * * * *")
  end

  def five_nodes_once_per_tick(env)
    nodes = Array.new(5) { |i| worker("node-#{i}", env: env) }
    eventually("the first tick", timeout: 30) { !jobs_by_tick.empty? }
    started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    kills = 0
    round = 0
    killed_at = jobs_by_tick.keys.max
    while Process.clock_gettime(Process::CLOCK_MONOTONIC) - started < SECONDS
      # One node down at a time: the next kill once the node started last
      # has registered and a tick due after the last kill was enqueued.
      # (A replacement that exited at start does not hold the run up.)
      eventually("a tick after the kill at #{killed_at} with every node up", timeout: 60) do
        jobs_by_tick.keys.max > killed_at && nodes.all? { |n| n.node_id(redis) || n.exited? }
      end
      # SIGKILL (no shutdown at all), then a fresh process in its place,
      # which starts proposing at once.
      i = round % nodes.size
      nodes[i].kill!
      killed_at = redis_now_ms
      kills += 1
      nodes[i] = worker("node-#{i}-r#{round}", env: env)
      round += 1
    end
    eventually("a tick after the last kill", timeout: 30) { jobs_by_tick.keys.max > killed_at }
    nodes.each { |n| n.stop("TERM") }
    by_tick = jobs_by_tick
    assert_once_per_tick(by_tick, "#{kills} SIGKILLs")
    assert_empty gaps(by_tick), "a tick was missed while four nodes were up"
    assert_operator by_tick.size, :>=, SECONDS.floor, "one job per second of the run"
    state = redis.hgetall(key("recurring:probe"))
    assert_equal by_tick.keys.max, Integer(state["job_tick_ms"])
    assert_includes redis.lrange(key("channel:recurring"), 0, 0).first, state["job_id"]
  end

  def test_a_redis_restart_from_its_aof_enqueues_no_tick_twice
    server = RedisServer.new(appendonly: true).start
    client = Redis.new(url: server.url)
    3.times { |i| worker("node-#{i}", url: server.url) }
    eventually("ticks flow", timeout: 30) { jobs_by_tick(client).size >= 3 }
    server.stop
    sleep 2.5 # the outage itself, 2.5 s of wall clock: ticks fall due while every node's proposals fail and back off
    server.start
    before = jobs_by_tick(client).size
    eventually("ticks flow again", timeout: 30) { jobs_by_tick(client).size >= before + 3 }
    @workers.each { |w| w.stop("TERM") }
    by_tick = jobs_by_tick(client)
    assert_once_per_tick(by_tick, "after a Redis restart")
    # What the outage hid is at most its own span (and the latest missed
    # tick is run once when Redis is back: missed: :latest).
    assert_operator gaps(by_tick).size, :<=, 5, "ticks missed beyond the outage"
  ensure
    server&.cleanup
  end

  def test_nodes_with_skewed_clocks_never_enqueue_early_or_twice
    skip "libfaketime is not installed (bin/setup installs the faketime package)" unless FakeTime.available?

    fast = worker("fast", env: FakeTime.env("+30s"))
    # Redis' clock and the newest job together (MULTI), at every poll until
    # the fast node has enqueued three ticks: a tick taken from the fast
    # clock would be ~30 s ahead of Redis.
    early = []
    eventually("three ticks from the fast node", timeout: 60) do
      flunk("the fast node exited:\n#{fast.log_tail}") if fast.exited?
      time, newest = redis.multi do |m|
        m.time
        m.lindex(key("channel:recurring"), 0)
      end
      if newest
        tick = JSON.parse(newest).dig("meta", "tick_ms")
        early << tick if tick > (time[0] * 1000) + (time[1] / 1000)
      end
      jobs_by_tick.size >= 3
    end
    refute_empty jobs_by_tick, "the fast node enqueued ticks (once Redis' clock reached them)"
    assert_empty early, "ticks enqueued before Redis' clock reached them"
    slow = worker("slow", env: FakeTime.env("-30s"))
    real = worker("true")
    # Three ticks decided while all three nodes run.
    [slow, real].each { |n| registered(n) }
    all_up = redis_now_ms
    eventually("three ticks with all three nodes up", timeout: 30) { jobs_by_tick.keys.count { |t| t > all_up } >= 3 }
    @workers.each { |w| w.stop("TERM") }
    by_tick = jobs_by_tick
    assert_once_per_tick(by_tick, "nodes at -30 s, 0 and +30 s")
    assert_operator by_tick.keys.max, :<=, redis_now_ms
    assert_empty gaps(by_tick)
  end

  def test_a_recurring_job_is_an_ordinary_job_and_no_scheduler_nodes_enqueue_nothing
    quiet = worker("quiet", args: ["--no-scheduler"])
    id = registered(quiet)
    # A heartbeat of the node from after two more ticks fell due: a
    # scheduler would have enqueued them (and the one due at its start).
    now = redis_now_ms
    second_tick = now - (now % 1000) + 2000
    eventually("a heartbeat after the second tick due", timeout: 20) { heartbeat_stamp(id).to_i > second_tick + 500 }
    refute_match(/recurring scheduler/, File.read(quiet.log))
    assert_empty jobs_by_tick, "a node started with --no-scheduler enqueued ticks"
    quiet.stop("TERM")
    worker("runs-them", args: ["--channel", "recurring"])
    eventually("two recurring jobs ran", timeout: 20) { ledger_lines.count { |l| l.start_with?("tick ") } >= 2 }
    state = redis.hgetall(key("recurring:probe"))
    assert_equal "enqueued", state["outcome"]
    assert_operator redis.pttl(key("recurring:probe")), :>, (SolidJobs::Native::RECURRING_RETENTION - 5) * 1000
  end

  private

  # Node `worker`'s id once it has registered (its first heartbeat); fails
  # at once, with its log, if it exited instead.
  def registered(worker)
    eventually("#{worker.log} registered", timeout: 60) do
      flunk("#{worker.log} exited:\n#{worker.log_tail}") if worker.exited?
      worker.node_id(redis)
    end
  end
end
