# frozen_string_literal: true

require_relative "test_helper"

# Worker nodes in this process: a Conductor with worker Ractors (or threads)
# fed by the native dispatcher, against the suite's Redis.
class WorkerTest < SolidJobsTest
  def test_cpu_bound_tasks_run_on_more_than_one_worker_ractor
    path = ledger_path
    CpuTask.enqueue_many(Array.new(40) { |i| [path, "cpu-#{i}"] })
    start_conductor
    eventually("40 tasks in the ledger") { ledger_lines.size == 40 }
    workers = ledger_lines.map { |l| l.split[1] }.tally
    assert_operator workers.size, :>=, 2, "tasks ran on #{workers.inspect}"
    assert(workers.keys.all? { |w| w.start_with?("solid-jobs-worker-") }, workers.inspect)
    assert_equal 40, ledger_lines.map(&:split).map(&:first).uniq.size, "each job ran once"
    eventually("claims settled") { claims_count.zero? && redis.get(key("metric:processed")).to_i == 40 }
  end

  def test_thread_mode_runs_the_same_tasks
    configure_solid_jobs(execution_mode: :thread)
    path = ledger_path
    LedgerTask.enqueue_many(Array.new(10) { |i| [path, "t#{i}"] })
    start_conductor
    eventually("10 tasks") { ledger_lines.size == 10 }
    assert(ledger_lines.all? { |l| l.split[1].start_with?("solid-jobs-worker-") })
  end

  def test_failing_task_is_retried_with_backoff_then_archived
    path = ledger_path
    id = FailingTask.enqueue(path, "f")
    start_conductor
    eventually("first failure recorded") { redis.zcard(key("retrying")) == 1 }
    attempts = JSON.parse(redis.hget(key("attempts"), id))
    assert_equal 1, attempts["failures"]
    assert_equal "ArgumentError", attempts["error_class"]
    due = redis.zrange(key("retrying"), 0, -1, with_scores: true).first.last
    assert_operator due, :>=, SolidJobs::Clock.now_ms + 1_000, "default backoff is at least BASE/2"

    # Make the retry due now and ring the doorbell, as a newly planned job would.
    member = redis.zrange(key("retrying"), 0, -1).first
    redis.zadd(key("retrying"), 0, member)
    redis.publish(key("doorbell"), "planned")
    eventually("archived after max_failures") { redis.zcard(key("archive")) == 1 }
    record = JSON.parse(redis.hget(key("archive:entries"), id))
    assert_equal "FailingTask", record["task"]
    assert_equal 2, record["failures"]
    assert_equal "ArgumentError", record["error_class"]
    assert_match(/max_failures 2/, record["reason"])
    assert_equal [path, "f"], SolidJobs::Archive.find(id)["envelope"]["arguments"]
    assert_equal ["attempt f", "attempt f"], ledger_lines
    refute redis.hexists(key("attempts"), id)
    assert_equal 0, claims_count
  end

  def test_planned_job_runs_once_due
    path = ledger_path
    start_conductor
    enqueued_at = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    LedgerTask.enqueue_after(0.6, path, "later")
    eventually("planned job ran") { ledger_lines.size == 1 }
    assert_operator Process.clock_gettime(Process::CLOCK_MONOTONIC) - enqueued_at, :>=, 0.55, "ran before it was due"
    assert_equal 0, redis.zcard(key("planned"))
  end

  def test_channels_in_priority_order
    configure_solid_jobs(channels: %w[critical default], channel_order: :priority, concurrency: 1, prefetch: 1)
    path = ledger_path
    LedgerTask.enqueue_many(Array.new(5) { |i| [path, "default-#{i}"] })
    CriticalTask.enqueue_many(Array.new(5) { |i| [path, "critical-#{i}"] })
    start_conductor
    eventually("all ran") { ledger_lines.size == 10 }
    expected = Array.new(5) { |i| "critical-#{i}" } + Array.new(5) { |i| "default-#{i}" }
    assert_equal expected, ledger_lines.map { |l| l.split.first }
  end

  def test_malformed_entries_are_quarantined_unknown_tasks_retried_and_work_goes_on
    redis.lpush(key("channel:default"), "{garbage")
    unknown = foreign_envelope("NoSuchTask", [])
    redis.lpush(key("channel:default"), unknown)
    redis.lpush(key("channel:default"), foreign_envelope("NotATask", []))
    path = ledger_path
    LedgerTask.enqueue(path, "after-bad-input")
    start_conductor
    eventually("good job ran") { ledger_lines.size == 1 }
    eventually("two quarantined") { redis.zcard(key("archive")) == 2 }
    eventually("the unknown task waits for a retry") { redis.zcard(key("retrying")) == 1 }
    records = redis.hvals(key("archive:entries")).map { |r| JSON.parse(r) }
    reasons = records.map { |r| r["reason"] }
    garbage = records.find { |r| r["raw"] == "{garbage" }
    assert_match(/invalid envelope/, garbage["reason"])
    assert(reasons.any? { |r| r.include?("NotATask is not a SolidJobs::Task") }, reasons.inspect)
    refute(reasons.any? { |r| r.include?("\n") }, "reasons are one line")
    attempts = JSON.parse(redis.hget(key("attempts"), JSON.parse(unknown)["id"]))
    assert_match(/\Aunknown task NoSuchTask/, attempts["message"])
    refute_includes attempts["message"], "\n"
    eventually("claims settled") { claims_count.zero? }
  end

  def test_wrong_shaped_envelope_is_quarantined
    wrong = JSON.parse(foreign_envelope("LedgerTask", [])).merge("arguments" => {"not" => "an array"})
    redis.lpush(key("channel:default"), JSON.generate(wrong))
    start_conductor
    eventually("quarantined") { redis.zcard(key("archive")) == 1 }
    assert_match(/arguments must be a JSON array/, JSON.parse(redis.hvals(key("archive:entries")).first)["reason"])
  end

  def test_non_standard_error_fails_visibly_without_killing_the_worker
    path = ledger_path
    id = FatalTask.enqueue
    LedgerTask.enqueue(path, "still-working")
    configure_solid_jobs(concurrency: 1)
    start_conductor
    eventually("archived") { redis.zcard(key("archive")) == 1 }
    record = SolidJobs::Archive.find(id)
    assert_equal "Exception", record["error_class"]
    assert_match(/not a StandardError/, record["message"])
    eventually("the same worker went on") { ledger_lines.size == 1 }
  end

  def test_envelope_written_by_another_producer_runs
    path = ledger_path
    redis.lpush(key("channel:default"), foreign_envelope("LedgerTask", [path, "foreign"]))
    start_conductor
    eventually("foreign job ran") { ledger_lines.size == 1 }
    assert_match(/\Aforeign /, ledger_lines.first)
  end

  def test_ractor_isolation_error_is_archived_at_once_with_advice
    id = GlobalTouchingTask.enqueue
    start_conductor
    eventually("archived") { redis.zcard(key("archive")) == 1 }
    record = SolidJobs::Archive.find(id)
    assert_equal "Ractor::IsolationError", record["error_class"]
    assert_match(/execution_mode = :thread/, record["message"])
    assert_equal 1, record["failures"]
    assert_equal 0, redis.zcard(key("retrying"))
  end

  def test_execute_interceptors_run_inside_worker_ractors
    path = ledger_path
    SolidJobs.config.execute_interceptors.use(LedgerInterceptor, path)
    LedgerTask.enqueue(path, "wrapped")
    start_conductor
    eventually("interceptor finished") { ledger_lines.size == 3 }
    before, task, after = ledger_lines
    assert_match(/\Abefore LedgerTask solid-jobs-worker-\d+\z/, before)
    assert_match(/\Awrapped solid-jobs-worker-/, task)
    assert_equal "after LedgerTask", after
  end

  def test_shutdown_lets_running_tasks_finish_and_requeues_the_rest_at_the_head
    configure_solid_jobs(prefetch: 4)
    path = ledger_path
    SlowTask.enqueue_many(Array.new(6) { |i| [path, "s#{i}", 0.5] })
    conductor = start_conductor
    eventually("two tasks started") { ledger_lines.count { |l| l.start_with?("start") } == 2 }
    assert conductor.stop(timeout: 10), "running tasks finished within the timeout"
    @conductor = nil
    finished = ledger_lines.reject { |l| l.start_with?("start") }
    assert_equal 2, finished.size
    assert_equal 4, redis.llen(key("channel:default"))
    assert_equal 0, claims_count
    # Requeued at the head, oldest first: the next claim gets s2.
    assert_equal [path, "s2", 0.5], JSON.parse(redis.lindex(key("channel:default"), -1))["arguments"]
    refute redis.sismember(key("nodes"), conductor.node_id)
  end

  def test_shutdown_timeout_requeues_tasks_still_running
    path = ledger_path
    SlowTask.enqueue_many([[path, "long-1", 3], [path, "long-2", 3]])
    conductor = start_conductor
    eventually("both started") { ledger_lines.size == 2 }
    refute conductor.stop(timeout: 0.2), "tasks could not finish in 0.2s"
    @conductor = nil
    assert_equal 2, redis.llen(key("channel:default"))
    assert_equal 0, claims_count
  end

  private

  def foreign_envelope(task, arguments)
    # Another producer: different key order, extra whitespace.
    %({ "task": "#{task}", "arguments": #{JSON.generate(arguments)}, "id": "#{SecureRandom.uuid}",
        "channel": "default", "queued_ms": 1, "created_ms": 1, "max_failures": 3 })
  end
end
