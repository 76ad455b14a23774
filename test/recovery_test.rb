# frozen_string_literal: true

require_relative "test_helper"

# Crash recovery and fencing with real processes and real SIGKILLs.
class RecoveryTest < SolidJobsTest
  def worker(*args, env: {}, name: "worker")
    log = File.join(@ledger_dir, "#{name}.log")
    (@workers ||= []) << WorkerProcess.new(redis_url: REDIS.url, namespace: @namespace, log: log, args: args, env: env).start
    @workers.last
  end

  def teardown
    @workers&.each { |w| w.signal("KILL") && w.wait(timeout: 5) }
    super
  end

  def completions(label) = ledger_lines.count { |l| l.start_with?("#{label} ") }
  def monotonic = Process.clock_gettime(Process::CLOCK_MONOTONIC)

  def test_sigkilled_worker_loses_its_claims_which_run_again_after_the_recovery_delay
    path = ledger_path
    victim = worker("--concurrency", "1", name: "victim")
    SlowTask.enqueue(path, "victim-job", 3)
    eventually("victim started the job") { ledger_lines.include?("start victim-job") }
    node = eventually("victim registered") { victim.node_id(redis) }
    assert_equal 1, redis.hlen(key("claims:#{node}"))
    victim.kill!
    killed_at = monotonic

    rescuer = worker("--concurrency", "1", name: "rescuer")
    eventually("claims recovered") { !redis.exists?(key("claims:#{node}")) }
    recovered_after = monotonic - killed_at
    eventually("job ran again on the rescuer", timeout: 30) { completions("victim-job") == 1 }
    assert_equal rescuer.pid.to_s, ledger_lines.find { |l| l.start_with?("victim-job ") }.split[2]
    refute redis.sismember(key("nodes"), node), "dead node deregistered"
    # The heartbeat TTL is 2 s, refreshed every 0.5 s: no recovery before 1.5 s.
    assert_operator recovered_after, :>=, 1.4, "recovered before the heartbeat could have expired"
  end

  def test_concurrent_recovery_scans_requeue_a_dead_nodes_claims_exactly_once
    path = ledger_path
    victim = worker("--concurrency", "1", env: {"SOLID_JOBS_TEST_PREFETCH" => "6"}, name: "victim")
    SlowTask.enqueue_many(Array.new(6) { |i| [path, "job-#{i}", 1.5] })
    eventually("victim holds every job") { (node = victim.node_id(redis)) && redis.hlen(key("claims:#{node}")) == 6 }
    victim.kill!
    # Two live nodes scan for dead nodes every 0.5 s, racing for the same claims.
    worker("--concurrency", "3", name: "a")
    worker("--concurrency", "3", name: "b")
    eventually("every job completed", timeout: 40) { (0...6).all? { |i| completions("job-#{i}") >= 1 } }
    eventually("all claims settled") { claims_count.zero? && redis.llen(key("channel:default")).zero? }
    6.times { |i| assert_equal 1, completions("job-#{i}"), "job-#{i} must be requeued once, so run once" }
  end

  def test_stale_completion_is_rejected_and_changes_nothing
    path = ledger_path
    start_conductor
    SlowTask.enqueue(path, "fenced", 0.8)
    eventually("started") { ledger_lines.include?("start fenced") }
    recover_claims_behind_the_workers_back
    eventually("ran again after the stale completion", timeout: 30) { completions("fenced") == 2 }
    eventually("processed once") { redis.get(key("metric:processed")).to_i == 1 }
    assert_equal 1, redis.get(key("metric:stale")).to_i
    assert_equal 0, claims_count
  end

  def test_stale_failure_is_rejected_and_records_nothing
    path = ledger_path
    start_conductor
    id = SlowFailingTask.enqueue(path, "fenced-failure", 0.8)
    eventually("started") { ledger_lines.include?("start fenced-failure") }
    recover_claims_behind_the_workers_back
    eventually("failed again, this time recorded", timeout: 30) { redis.hexists(key("attempts"), id) }
    assert_equal 1, JSON.parse(redis.hget(key("attempts"), id))["failures"], "the stale failure wrote nothing"
    assert_equal 1, redis.get(key("metric:stale")).to_i
  end

  def test_redis_outage_workers_reconnect_and_nothing_is_lost
    outage_redis = RedisServer.new(appendonly: true).start
    url = outage_redis.url
    configure_solid_jobs(redis_url: url)
    path = ledger_path
    SlowTask.enqueue_many(Array.new(12) { |i| [path, "o#{i}", 0.3] })
    w = WorkerProcess.new(redis_url: url, namespace: @namespace, log: File.join(@ledger_dir, "outage.log"),
                          args: %w[--concurrency 2], env: {"SOLID_JOBS_TEST_RECOVERY_DELAY" => "10"}).start
    eventually("some jobs ran") { ledger_lines.count { |l| l.start_with?("o") } >= 2 }
    outage_redis.stop
    before = ledger_lines.size
    assert_raises(SolidJobs::ConnectionError) { SlowTask.enqueue(path, "during-outage", 0) }
    # A job finishes while Redis is down: its completion meets the outage
    # (unless every job had already run, leaving nothing to meet it).
    eventually("a job finished during the outage") do
      ledger_lines.drop(before).any? { |l| l.match?(/\Ao\d+ /) } || (0...12).all? { |i| completions("o#{i}") >= 1 }
    end
    sleep 1.0 # the outage goes on: that completion's write and the claims retry against a Redis that is down
    outage_redis.start
    SlowTask.enqueue(path, "after-outage", 0)
    eventually("every job ran", timeout: 60) do
      (0...12).all? { |i| completions("o#{i}") >= 1 } && completions("after-outage") == 1
    end
    w.signal("TERM")
    assert_equal 0, w.wait.exitstatus, File.read(w.log)
    check = Redis.new(url: url)
    assert_equal 0, check.keys(key("claims:*")).sum { |k| check.hlen(k) }
    assert_equal 0, check.llen(key("channel:default"))
  ensure
    outage_redis&.cleanup
  end

  private

  # What recovery does to a dead node's claims, done to a live one: the
  # running job's token becomes stale.
  def recover_claims_behind_the_workers_back
    claims = key("claims:#{@conductor.node_id}")
    token, record = redis.hgetall(claims).first
    channel, _ms, raw = record.split("|", 3)
    redis.multi do |tx|
      tx.hdel(claims, token)
      tx.rpush(key("channel:#{channel}"), raw)
    end
  end
end
