# frozen_string_literal: true

require_relative "test_helper"
require_relative "support/torture"

# The small torture run of the default suite: a few thousand jobs, a few
# SIGKILLs, one Redis restart, unique jobs of each mode among them, and an
# every: 1 schedule on every worker, concurrency and rate limited jobs, and
# jobs of every priority. Its assertions are about outcomes only (no job
# lost, nothing left claimed, ready in any level list or throttled, no
# unique lock, slot, rate log past its window or wake left, no tick
# enqueued twice, no key over its limit or its rate), never about timing.
class TortureTest < SolidJobsTest
  def test_no_job_is_lost_through_kills_and_a_redis_restart
    out = StringIO.new
    result = Torture.new(jobs: 3000, workers: 3, kills: 3, redis_restarts: 1, work_ms: 2, timeout: 300, out: out,
                         recurring: true).run
    puts "\n#{result.summary}" if ENV["VERBOSE"]
    assert_equal 0, result.missing, "#{result.summary}\n#{out.string}"
    assert_equal 3000, result.completed
    assert_equal 0, result.leftover_claims, out.string
    assert_equal 0, result.leftover_ready, out.string
    assert_equal 600, result.unique_jobs, "every fifth job is unique"
    assert_equal 0, result.unique_written_twice, "a second enqueue of a live unique job is a duplicate"
    assert_equal 0, result.leftover_locks, "no unique lock outlives its job (#{out.string})"
    assert_equal 3, result.kills
    assert_equal 1, result.redis_restarts
    assert_equal 0, result.recurring_duplicates, "a recurring tick enqueued twice: #{result.summary}"
    assert_operator result.recurring_ticks, :>=, 1, result.summary
    assert_operator result.limited_jobs, :>, 300, "every seventh other job is concurrency limited"
    assert_equal 0, result.limit_exceeded, "no key ran more than its limit at once: #{result.summary}"
    assert_equal 0, result.leftover_slots, "no slot outlives its claim (#{out.string})"
    assert_equal 0, result.leftover_blocked, out.string
    assert_operator result.rate_jobs, :>, 150, "every eleventh other job is rate limited"
    assert_equal 0, result.rate_exceeded, "no key started more than its rate in a window: #{result.summary}"
    assert_operator result.rate_busiest, :>=, TortureTask::Rated::LIMIT / 2, "a key reached its rate: #{result.summary}"
    assert_equal 0, result.leftover_throttled, out.string
    assert_equal 0, result.leftover_rate_logs, "no rate log outlives its window (#{out.string})"
    assert_equal 0, result.leftover_wakes, "no wake of a key with nothing throttled (#{out.string})"
    assert_operator result.prioritized_jobs, :>, 500, "a quarter of the other jobs carry a priority"
    assert_equal 0, result.leftover_levels, "no job left in a level list (#{out.string})"
  end
end
