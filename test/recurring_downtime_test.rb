# frozen_string_literal: true

require_relative "test_helper"
require_relative "support/recurring_helpers"
require_relative "support/redis_monitor"

# Downtime with real processes: a schedule whose nodes were all down for
# two periods. Its state says the last decided tick was two periods before
# the latest (as recurring.lua left it when the nodes last ran); three
# worker nodes then start. The latest tick is more than the 60 s on-time
# window late, so it was missed, like the one before it: `missed: :latest`
# enqueues the latest once (never both: no burst after downtime), `:skip`
# neither, and records it decided. The period is picked so that the latest
# tick is late but the next one is not due during the test.
class RecurringDowntimeTest < SolidJobsTest
  include RecurringHelpers

  def setup
    super
    @watchers = []
  end

  def teardown
    @watchers.each(&:close)
    super
  end

  def test_after_downtime_the_latest_missed_tick_runs_once
    jobs, state = restart_after_downtime("latest")
    assert_equal [@latest], jobs, "only the latest of the two missed ticks"
    assert_equal "enqueued", state["outcome"]
    assert_equal @latest, Integer(state["job_tick_ms"])
  end

  def test_after_downtime_missed_ticks_are_skipped
    jobs, state = restart_after_downtime("skip")
    assert_empty jobs, "no job for either missed tick"
    assert_equal "skipped", state["outcome"]
    assert_equal @latest, Integer(state["tick_ms"]), "the latest missed tick is recorded decided"
  end

  private

  def restart_after_downtime(missed)
    period_s, @latest = period_with_a_missed_latest_tick
    before = @latest - (2 * period_s * 1000)
    redis.hset(key("recurring:probe"), "tick_ms", before, "decided_ms", before, "job_id", "before-the-downtime",
               "job_tick_ms", before, "enqueued_ms", before, "outcome", "enqueued")
    env = {"SOLID_JOBS_TEST_RECURRING_EVERY" => period_s.to_s, "SOLID_JOBS_TEST_RECURRING_MISSED" => missed}
    proposers = watch_proposals
    3.times { |i| worker("node-#{i}", env: env) }
    # Each node proposes when it starts: the first decides, the others find
    # it decided (and propose again only at the next tick, 30 s or more
    # away). Once the three have proposed, a second decision would show.
    eventually("a decision after the downtime", timeout: 60) do
      Integer(redis.hget(key("recurring:probe"), "tick_ms")) > before
    end
    eventually("a proposal from each node", timeout: 60) { proposers.call.size >= 3 }
    @workers.each { |w| w.stop("TERM") }
    [ticks, redis.hgetall(key("recurring:probe"))]
  end

  # Watches, with MONITOR, the calls of recurring.lua for this schedule.
  # Returns, once watching, a lambda that gives the connections that made
  # one so far (a node proposes on its scheduler's own connection).
  def watch_proposals
    proposal = /"EVAL(?:SHA)?" .*"#{Regexp.escape(key("recurring:probe"))}"/i
    monitor = RedisMonitor.new(REDIS.url) { |line| line[/\[\d+ ([^\]]+)\]/, 1] if line.match?(proposal) }
    @watchers << monitor.start(redis)
    -> { monitor.kept.uniq }
  end

  # An `every:` period (seconds) whose latest tick is 65 s or more behind
  # Redis' clock, with the next tick at least 30 s ahead; and that tick (ms).
  def period_with_a_missed_latest_tick
    s, us = redis.time
    now_ms = (s * 1000) + (us / 1000)
    (120..3600).each do |period|
      latest = now_ms - (now_ms % (period * 1000))
      return [period, latest] if now_ms - latest >= 65_000 && latest + (period * 1000) - now_ms >= 30_000
    end
    flunk "no period fits"
  end

  # Every tick once per job (a tick enqueued twice appears twice).
  def ticks = jobs_by_tick.flat_map { |tick, n| [tick] * n }.sort
end
