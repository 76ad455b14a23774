# frozen_string_literal: true

require_relative "test_helper"

# Failures decided by the code, not the moment, in real worker processes:
# a Ractor isolation error fails every attempt alike, so it is given up at
# once unless the task's retry_delay asks for retries.
class TaskFailureModesTest < SolidJobsTest
  def teardown
    @worker&.kill!
    super
  end

  def start_worker
    log = File.join(@ledger_dir, "worker.log")
    @worker = WorkerProcess.new(redis_url: REDIS.url, namespace: @namespace, log: log, args: %w[--concurrency 1]).start
  end

  def test_an_isolation_error_is_archived_at_the_first_failure_with_the_advice
    id = GlobalTouchingTask.enqueue
    start_worker
    eventually("archived") { redis.zcard(key("archive")) == 1 }
    record = SolidJobs::Archive.find(id)
    assert_equal "Ractor::IsolationError", record["error_class"]
    assert_equal 1, record["failures"], "given up at the first failure, not after 25"
    assert_match(/fails the same way on every attempt inside a Ractor/, record["reason"])
    assert_match(/task GlobalTouchingTask cannot run inside a Ractor .*`task_options execution: :thread`/, record["message"])
    assert_equal 0, redis.zcard(key("retrying"))
    assert_match(/GlobalTouchingTask #{id} given up after 1 failure\(s\)/, File.read(@worker.log))
  end

  def test_retry_delay_may_still_ask_for_retries
    id = RetriedGlobalTouchingTask.enqueue
    start_worker
    eventually("retry scheduled") { redis.zcard(key("retrying")) == 1 }
    due = redis.zrange(key("retrying"), 0, -1, with_scores: true).first.last
    assert_in_delta SolidJobs::Clock.now_ms + 30_000, due, 5_000, "the delay retry_delay chose"
    assert_equal "Ractor::IsolationError", JSON.parse(redis.hget(key("attempts"), id))["error_class"]
    assert_equal 0, redis.zcard(key("archive"))
  end
end
