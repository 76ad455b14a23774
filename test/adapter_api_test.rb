# frozen_string_literal: true

require_relative "test_helper"

# The adapter API, the same calls on both backends: claim, ack, retry_job,
# fail_job, fencing of late settles, get_job, cancel and recover, with one
# error vocabulary (README "Errors").
module AdapterContract
  def test_unknown_ids_are_not_found_the_same_way_on_both_backends
    ["nope", "", SecureRandom.uuid, SecureRandom.uuid.delete("-")].each do |id|
      assert_nil backend.get_job(id), id.inspect
      assert_equal false, backend.cancel(id), id.inspect
    end
  end

  def test_cancelling_a_running_job_raises_job_running_and_changes_nothing
    id = LedgerTask.enqueue("/dev/null", "running")
    claim = backend.claim("default")
    error = assert_raises(SolidJobs::JobRunning) { backend.cancel(id) }
    assert_equal "job #{id} is running and cannot be cancelled", error.message
    assert backend.ack(claim), "the running job was left as it was"
    assert_equal false, backend.cancel(id), "a finished job has nothing to cancel"
  end

  def test_backend_error_replies_are_backend_errors_named_for_their_backend
    error = assert_raises(SolidJobs::BackendError) { backend.client.call(["NOSUCHCOMMAND"]) }
    assert_kind_of error_class, error
    assert error.message.start_with?("#{backend_label} error: "), error.message
  end

  def test_claim_ack_and_a_second_ack_is_stale
    id = LedgerTask.enqueue("/dev/null", "a")
    claim = backend.claim("default")
    assert_equal id, claim.job_id
    assert_equal ["/dev/null", "a"], claim.envelope["arguments"]
    assert_kind_of Integer, claim.fence
    assert backend.ack(claim)
    assert_raises(SolidJobs::StaleClaimError) { backend.ack(claim) }
    assert_nil backend.claim("default")
  end

  def test_retry_job_and_fail_job
    retried = LedgerTask.enqueue("/dev/null", "r")
    claim = backend.claim("default")
    backend.retry_job(claim, delay: 60)
    assert_includes %w[retrying scheduled], backend.get_job(retried)["state"]
    assert_raises(SolidJobs::StaleClaimError) { backend.fail_job(claim) }

    failed = LedgerTask.enqueue("/dev/null", "f")
    claim = backend.claim("default")
    assert_equal failed, claim.job_id
    backend.fail_job(claim, reason: "broken on purpose")
    assert_includes %w[archived dead], backend.get_job(failed)["state"]
  end
end

class RedisAdapterApiTest < SolidJobsTest
  include AdapterContract

  def backend = SolidJobs.routing.backend_for("default")
  def error_class = SolidJobs::RedisError
  def backend_label = "Redis"

  def test_recover_requeues_claims_of_expired_nodes
    id = LedgerTask.enqueue("/dev/null", "recovered")
    claim = backend.claim("default")
    assert_equal 0, backend.recover, "the claiming node is alive"
    redis.del(key("node:#{claim.reservation}"))
    assert_equal 1, backend.recover
    assert_raises(SolidJobs::StaleClaimError) { backend.ack(claim) }
    assert_equal id, backend.claim("default").job_id
  end

  class LimitedToOne
    include SolidJobs::Task
    task_options concurrency: {limit: 1}

    def execute_task(*) = nil
  end

  # A claim sets aside at most 1,000 jobs of saturated keys per call (the
  # blocked budget) and then says `more`: the adapter's claim looks again
  # rather than answering nil while a claimable job waits behind them.
  def test_claim_looks_past_more_than_a_blocked_budget_of_saturated_jobs
    running = LimitedToOne.enqueue
    assert_equal running, backend.claim("default").job_id, "the key's one slot"
    LimitedToOne.enqueue_many(Array.new(1_001) { [] })
    plain = LedgerTask.enqueue("/dev/null", "behind")
    claim = backend.claim("default")
    refute_nil claim, "a claimable job waited behind 1,001 blocked ones"
    assert_equal plain, claim.job_id
    blocked = redis.keys(key("blocked:*"))
    assert_equal [1_001], blocked.map { |k| redis.llen(k) }, "the saturated key's jobs wait, set aside"
  end
end

class SolidEngineAdapterApiTest < SolidJobsTest
  include AdapterContract

  def setup
    super
    @server = EngineServer.new(lease_ms: 500).start
    configure_solid_jobs(backend: :solid_engine, url: @server.url,
                         backends: {solid_engine: {adapter: :solid_engine, url: @server.url, lease: 0.3}})
  end

  def teardown
    super
    @server&.cleanup
  end

  def backend = SolidJobs.routing.backend_for("default")
  def error_class = SolidJobs::EngineError
  def backend_label = "SolidEngine"

  def test_a_refused_connection_names_solid_engine_and_its_url
    refused = "tcp://127.0.0.1:#{RedisServer.closed_port}"
    configure_solid_jobs(backend: :solid_engine, url: refused, backends: {})
    error = assert_raises(SolidJobs::ConnectionError) { LedgerTask.enqueue("/dev/null", "x") }
    assert_match(/\ASolidEngine connection failed: Connection refused .*\(#{Regexp.escape(refused)}\)\z/, error.message)
    refute_match(/redis/i, error.message)
  end

  def test_an_expired_lease_makes_the_job_claimable_again_and_the_old_claim_stale
    id = LedgerTask.enqueue("/dev/null", "lease")
    first = backend.claim("default")
    again = eventually("lease expired", timeout: 10) { backend.claim("default") }
    assert_equal id, again.job_id
    refute_equal first.fence, again.fence
    assert_raises(SolidJobs::StaleClaimError) { backend.ack(first) }
    assert backend.extend_lease(again, 5)
    assert backend.ack(again)
    assert_equal "completed", backend.get_job(id)["state"]
  end
end
