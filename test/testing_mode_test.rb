# frozen_string_literal: true

require_relative "test_helper"

class TestingModeTest < SolidJobsTest
  def setup
    super
    configure_solid_jobs(redis_url: "redis://127.0.0.1:#{RedisServer.closed_port}/0") # unreachable: must not be used
  end

  def test_capture_records_envelopes_without_redis
    captured = SolidJobs.testing!(:capture) do
      LedgerTask.enqueue("a", 1)
      CriticalTask.enqueue_many([["b", 2]])
      LedgerTask.captured
    end
    assert_equal 1, captured.size
    assert_equal ["a", 1], captured.first["arguments"]
    assert_equal "default", captured.first["channel"]
  end

  def test_capture_still_refuses_bad_arguments
    error = SolidJobs.testing!(:capture) { assert_raises(ArgumentError) { LedgerTask.enqueue("p", :nope) } }
    assert_match(/arguments\[1\] is a Symbol/, error.message)
  end

  def test_execute_runs_inline_with_json_round_tripped_arguments
    path = ledger_path
    SolidJobs.testing!(:execute) { LedgerTask.enqueue(path, "inline") }
    assert_equal ["inline main #{Process.pid}"], ledger_lines
    assert_raises(ArgumentError) { SolidJobs.testing!(:execute) { FailingTask.enqueue(path, "x") } }
  end

  def test_modes_end_with_the_block
    SolidJobs.testing!(:capture) { nil }
    refute SolidJobs::Testing.active?
    assert_raises(ArgumentError) { SolidJobs.testing!(:fake) { nil } }
  end
end
