# frozen_string_literal: true

require_relative "test_helper"

class FailurePolicyTest < SolidJobsTest
  FakeJob = Struct.new(:id, :max_failures, :envelope)

  def decide(task, failures, arguments: [], first_ms: SolidJobs::Clock.now_ms, error: RuntimeError.new("x"))
    job = FakeJob.new("id", task.solid_jobs_options[:max_failures], {"arguments" => arguments})
    SolidJobs::FailurePolicy.decide(task, job, error, failures, first_ms)
  end

  def test_default_is_capped_exponential_backoff_with_equal_jitter
    [1, 2, 5].each do |n|
      d = decide(LedgerTask, n)
      assert_equal :retry, d.action
      ceiling = [5 * 2**(n - 1), 6 * 3600].min
      assert_operator d.delay, :>=, ceiling / 2.0
      assert_operator d.delay, :<=, ceiling
    end
  end

  def test_isolation_errors_give_up_at_once_unless_retry_delay_says_otherwise
    [Ractor::IsolationError.new("touched a global"), Ractor::UnsafeError.new("unsafe C method")].each do |error|
      d = decide(LedgerTask, 1, error: error)
      assert_equal :archive, d.action, error.class.name
      assert_match(/#{error.class} fails the same way on every attempt/, d.reason)
    end
    d = decide(RetriedGlobalTouchingTask, 1, error: Ractor::IsolationError.new("touched a global"))
    assert_equal [:retry, 30.0], [d.action, d.delay]
    assert_equal :retry, decide(RetriedGlobalTouchingTask, 1).action, "other errors: the default policy"
  end

  def test_unknown_tasks_back_off_until_the_bound_then_archive
    now = SolidJobs::Clock.now_ms
    decide = lambda do |attempts, first_ms, unit|
      SolidJobs::FailurePolicy.decide_unknown(attempts, first_ms, retry_for: 100, now_ms: now, unit: unit)
    end
    assert_equal 0.5, decide.call(1, now, 0.0).delay
    assert_equal 1.0, decide.call(1, now, 1.0).delay
    assert_equal 30.0, decide.call(8, now - 50_000, 0.0).delay, "capped at 60 s, equal jitter"
    assert_in_delta 10.0, decide.call(8, now - 90_000, 1.0).delay, 0.001, "the last delay ends at the bound"
    d = decide.call(3, now - 100_000, 0.5)
    assert_equal :archive, d.action
    assert_match(/still unknown after 3 attempt\(s\) over 100.0s \(unknown_task_retry_for 100\)/, d.reason)
    # A backend that cannot date the first attempt (first = now): the
    # delays the backoff must have waited still end it.
    assert_equal :retry, decide.call(7, now, 0.0).action
    assert_equal :archive, decide.call(40, now, 0.0).action
    assert_equal :archive, SolidJobs::FailurePolicy.decide_unknown(1, now, retry_for: 0, now_ms: now).action, "0: at once"
  end

  def test_max_failures_archives
    d = decide(LedgerTask, 25)
    assert_equal :archive, d.action
    assert_match(/max_failures 25/, d.reason)
  end

  def test_retry_delay_block_branches
    assert_equal :drop, decide(ImportCatalog, 1, arguments: ["p", "l", "invalid"], error: InvalidCatalog.new).action
    assert_equal :retry, decide(ImportCatalog, 1, arguments: ["p", "l", "invalid"]).action, "nil falls back to the default"
    assert_equal :archive, decide(ImportCatalog, 1, arguments: ["p", "l", "archive"]).action
    assert_in_delta 0.1, decide(ImportCatalog, 2, arguments: ["p", "l", "custom"]).delay
    assert_equal :archive, decide(ImportCatalog, 3, arguments: ["p", "l", "custom"]).action, "max_failures still applies"
  end

  def test_a_raising_or_nonsensical_policy_falls_back_to_the_default
    d = decide(ImportCatalog, 1, arguments: ["p", "l", "raise-policy"])
    assert_equal :retry, d.action
    assert_operator d.delay, :>=, 2.5
    assert_equal :retry, decide(ImportCatalog, 1, arguments: ["p", "l", "garbage"]).action
  end

  def test_retry_within_stops_retrying_after_the_window
    now = SolidJobs::Clock.now_ms
    assert_equal :retry, decide(WithinTask, 1, first_ms: now).action
    d = decide(WithinTask, 2, first_ms: now - 500)
    assert_equal :archive, d.action
    assert_match(/retry_within 0.2/, d.reason)
  end

  def test_hooks_are_inherited_and_must_be_shareable
    refute_nil SubImport.solid_jobs_hook(:retry_delay)
    assert_nil LedgerTask.solid_jobs_hook(:retry_delay)
    mutable = +"captured"
    error = assert_raises(SolidJobs::ConfigurationError) do
      Class.new { include SolidJobs::Task }.retry_delay { |*| mutable.size }
    end
    assert_match(/must be Ractor-shareable/, error.message)
    assert_raises(SolidJobs::ConfigurationError) { Class.new { include SolidJobs::Task }.task_options(retry_within: -1) }
  end

  # End to end, in worker Ractors.

  def test_drop_discards_without_archive_and_runs_the_final_hook_once
    path = ledger_path
    id = ImportCatalog.enqueue(path, "dropped", "invalid")
    start_conductor
    eventually("hook ran") { ledger_lines.include?("final dropped InvalidCatalog") }
    eventually("claim settled") { claims_count.zero? }
    assert_equal 0, redis.zcard(key("archive"))
    assert_equal 0, redis.zcard(key("retrying"))
    assert_equal 1, redis.get(key("metric:discarded")).to_i
    refute redis.hexists(key("attempts"), id)
    assert_equal ["attempt dropped", "final dropped InvalidCatalog"], ledger_lines
  end

  def test_archive_decision_archives_now_and_a_raising_hook_loses_nothing
    path = ledger_path
    id = ImportCatalog.enqueue(path, "hook-raises", "archive")
    ImportCatalog.enqueue(path, "after", "archive")
    start_conductor
    eventually("both archived") { redis.zcard(key("archive")) == 2 }
    record = SolidJobs::Archive.find(id)
    assert_equal "retry_delay returned :archive", record["reason"]
    assert_equal "RuntimeError", record["error_class"]
    assert_equal [path, "hook-raises", "archive"], record["envelope"]["arguments"]
    eventually("both hooks ran") { ledger_lines.count { |l| l.start_with?("final") } == 2 }
  end

  def test_custom_delays_retry_until_max_failures_then_archive
    path = ledger_path
    id = ImportCatalog.enqueue(path, "c", "custom")
    start_conductor
    eventually("archived after 3 failures") { redis.zcard(key("archive")) == 1 }
    assert_equal 3, ledger_lines.count("attempt c")
    assert_equal 3, SolidJobs::Archive.find(id)["failures"]
    eventually("final hook") { ledger_lines.include?("final c RuntimeError") }
  end

  def test_retry_within_archives_a_job_still_failing_after_the_window
    path = ledger_path
    WithinTask.enqueue(path)
    start_conductor
    eventually("archived") { redis.zcard(key("archive")) == 1 }
    assert_equal 2, ledger_lines.count("attempt")
    assert_match(/retry_within/, SolidJobs::Archive.list.first["reason"])
  end

  def test_archived_jobs_can_be_listed_and_reenqueued_once
    path = ledger_path
    id = ImportCatalog.enqueue(path, "again", "archive")
    start_conductor
    eventually("archived") { SolidJobs::Archive.size == 1 }
    assert_equal [id], SolidJobs::Archive.list.map { |r| r["id"] }
    # No worker between the two calls: a running node could run the job
    # and archive it again in between, and the second call would rightly
    # re-enqueue it once more.
    @conductor.stop(timeout: 5)
    assert SolidJobs::Archive.reenqueue(id)
    refute SolidJobs::Archive.reenqueue(id)
    start_conductor
    eventually("ran again and was archived again") { ledger_lines.count("attempt again") == 2 && SolidJobs::Archive.size == 1 }
  end
end
