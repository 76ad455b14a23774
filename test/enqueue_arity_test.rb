# frozen_string_literal: true

require_relative "test_helper"

# Arguments that execute_task cannot take are refused at enqueue, before
# anything reaches Redis, on every way of enqueueing: a job that could only
# fail in the worker is a bug at the call site.
class EnqueueArityTest < SolidJobsTest
  class NoExecuteTask
    include SolidJobs::Task
  end

  class PrivateExecuteTask
    include SolidJobs::Task

    private

    def execute_task(_value) = nil
  end

  class KeywordTask
    include SolidJobs::Task

    def execute_task(value, scale:) = value * scale
  end

  class FlexibleTask
    include SolidJobs::Task

    def execute_task(first, second = nil, *rest, option: 1) = [first, second, rest, option]
  end

  class ReshapedTask
    include SolidJobs::Task

    def execute_task(one) = one
  end

  class ReshapedSubTask < ReshapedTask; end

  def nothing_written!
    assert_equal 0, redis.llen(key("channel:default")), "nothing may be written"
    assert_equal 0, redis.zcard(key("planned"))
    assert_equal 0, redis.hlen(key("jobs"))
  end

  def test_a_wrong_argument_count_is_refused_by_every_enqueue_method
    {
      "enqueue" => -> { LedgerTask.enqueue(1, 2, 3) },
      "enqueue_after" => -> { LedgerTask.enqueue_after(60, "path") },
      "schedule_at" => -> { LedgerTask.schedule_at(Time.now + 60, "path", "label", "extra") },
      "enqueue_many" => -> { LedgerTask.enqueue_many([%w[path a], %w[path b], ["path"]]) }
    }.each do |how, call|
      error = assert_raises(ArgumentError, how, &call)
      assert_match(/\ALedgerTask#execute_task takes 2 argument\(s\), got \d/, error.message, how)
      assert_match(/nothing was enqueued/, error.message)
    end
    error = assert_raises(ArgumentError) { LedgerTask.enqueue_many([%w[path a], %w[path b], ["path"]]) }
    assert_match(/got 1 in argument list 2/, error.message, "names the list, and refuses the whole batch")
    nothing_written!
  end

  def test_a_class_that_cannot_run_jobs_is_refused
    error = assert_raises(ArgumentError) { NoExecuteTask.enqueue }
    assert_match(/NoExecuteTask has no public execute_task method/, error.message)
    error = assert_raises(ArgumentError) { PrivateExecuteTask.enqueue(1) }
    assert_match(/PrivateExecuteTask has no public execute_task/, error.message)
    error = assert_raises(ArgumentError) { KeywordTask.enqueue_after(1, 2) }
    assert_match(/requires keyword argument\(s\) scale/, error.message)
    assert_raises(ArgumentError) { NoExecuteTask.enqueue_many([[]]) }
    assert_raises(ArgumentError) { NoExecuteTask.schedule_at(Time.now) }
    nothing_written!
  end

  def test_optional_and_rest_arguments_are_accepted
    assert_raises(ArgumentError) { FlexibleTask.enqueue }
    ids = [FlexibleTask.enqueue(1), FlexibleTask.enqueue(1, 2), FlexibleTask.enqueue(1, 2, 3, 4)]
    ids.concat(FlexibleTask.enqueue_many([[1], [1, 2, 3]]))
    assert_equal 5, redis.llen(key("channel:default"))
    assert_equal 5, ids.compact.uniq.size
    assert_match(/takes at least 1 argument/, assert_raises(ArgumentError) { FlexibleTask.enqueue_many([[1], []]) }.message)
    assert AnyArgumentsTask.enqueue
    assert ImportCatalog.enqueue("p", "l", "mode")
    assert_match(/takes 3 argument\(s\), got 2/, assert_raises(ArgumentError) { ImportCatalog.enqueue("p", "l") }.message)
    assert_match(/takes 2 to 3 argument\(s\)/, assert_raises(ArgumentError) { CpuTask.enqueue("p") }.message)
  end

  def test_the_cached_arity_follows_a_redefined_execute_task
    assert ReshapedTask.enqueue(1)
    assert ReshapedSubTask.enqueue(1)
    assert_raises(ArgumentError) { ReshapedTask.enqueue(1, 2) }
    ReshapedTask.class_eval { def execute_task(one, two) = [one, two] }
    assert ReshapedTask.enqueue(1, 2), "the class itself"
    assert ReshapedSubTask.enqueue(1, 2), "and its subclasses"
    assert_raises(ArgumentError) { ReshapedSubTask.enqueue(1) }
  ensure
    ReshapedTask.class_eval { def execute_task(one) = one } # rubocop:disable Lint/DuplicateMethods -- restores the shape the test redefined
  end

  def test_testing_mode_refuses_too
    SolidJobs.testing!(:capture) do
      assert_raises(ArgumentError) { LedgerTask.enqueue("only-one") }
      assert_empty LedgerTask.captured
    end
  end

  # A task that enqueues from inside a worker Ractor gets the same check
  # (there the arity cannot be cached on the class, which only the main
  # Ractor may write).
  def test_enqueues_from_worker_ractors_are_checked
    path = ledger_path
    EnqueuingTask.enqueue(path, "good")
    bad = EnqueuingTask.enqueue(path, "bad")
    start_conductor
    eventually("the good enqueue ran its job") { ledger_lines.any? { |l| l.start_with?("from-ractor solid-jobs-worker-") } }
    eventually("the bad one failed at enqueue") { SolidJobs::Archive.find(bad) }
    record = SolidJobs::Archive.find(bad)
    assert_equal "ArgumentError", record["error_class"]
    assert_match(/\ARactorEnqueuedTask#execute_task takes 2 argument\(s\), got 1; nothing was enqueued/, record["message"])
    assert_equal 1, ledger_lines.size
  end
end
