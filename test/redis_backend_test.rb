# frozen_string_literal: true

require_relative "test_helper"

# The Redis backend's adapter API: deduplication, get and cancel through the
# job index, and NotSupported for what it cannot do.
class RedisBackendTest < SolidJobsTest
  def backend = SolidJobs.routing.backend_for("default")

  def test_capabilities
    assert_equal SolidJobs::Backends::CAPABILITIES.sort, backend.capabilities.keys.sort
    assert backend.supports?(:cancel)
    refute backend.supports?(:lease_extension)
    assert_raises(ArgumentError) { backend.supports?(:teleport) }
    id = LedgerTask.enqueue("p", "x")
    claim = backend.claim("default")
    error = assert_raises(SolidJobs::Backends::NotSupported) { backend.extend_lease(claim, 30) }
    assert_match(/cannot extend_lease/, error.message)
    assert_equal id, claim.job_id
  end

  def test_get_and_cancel_a_waiting_job_which_then_never_runs
    path = ledger_path
    cancelled = LedgerTask.enqueue(path, "cancelled")
    kept = LedgerTask.enqueue(path, "kept")
    planned = LedgerTask.enqueue_after(0.2, path, "planned-cancelled")
    assert_equal({"id" => kept, "state" => "ready", "channel" => "default", "envelope" => nil}, backend.get_job(kept))
    assert_equal "planned", backend.get_job(planned)["state"]
    assert backend.cancel(cancelled)
    assert backend.cancel(planned)
    refute backend.cancel(cancelled)
    assert_equal "cancelled", backend.get_job(cancelled)["state"]
    start_conductor
    eventually("the kept job ran") { ledger_lines.size == 1 }
    eventually("the planned one was due and dropped") do
      redis.zcard(key("planned")).zero? && redis.get(key("metric:cancelled")).to_i == 2
    end
    assert_equal ["kept"], ledger_lines.map { |l| l.split.first }
    assert_nil backend.get_job(kept), "completed jobs are not kept"
  end

  def test_a_running_job_cannot_be_cancelled
    path = ledger_path
    id = SlowTask.enqueue(path, "busy", 1)
    start_conductor
    eventually("running") { ledger_lines.include?("start busy") }
    job = backend.get_job(id)
    assert_equal "claimed", job["state"]
    assert_equal [path, "busy", 1], job["envelope"]["arguments"]
    error = assert_raises(SolidJobs::JobRunning) { backend.cancel(id) }
    assert_equal "job #{id} is running and cannot be cancelled", error.message
  end

  def test_a_live_id_is_not_enqueued_twice
    envelope = SolidJobs::Native::Client.build("LedgerTask", ["p", "x"], "default", 3, nil)
    backend.push_envelopes([envelope], nil)
    backend.push_envelopes([envelope], nil)
    assert_equal 1, redis.llen(key("channel:default"))
  end
end
