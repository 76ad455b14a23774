# frozen_string_literal: true

require_relative "test_helper"
require_relative "support/fault_proxy"
require_relative "support/command_meter"
require "fileutils"

# Claims under faults the happy path never meets, with real worker
# processes: a claim request that reaches Redis after its connection was
# given up (a black hole, then late delivery through the fault proxy), a
# Redis restored from an older snapshot or restarted empty, and
# completions whose replies are cut so the acker resends them.
class ClaimsFaultTest < SolidJobsTest
  def teardown
    @workers&.each { |w| w.signal("KILL") && w.wait(timeout: 5) }
    @proxy&.close
    @private_redis&.cleanup
    @engine&.cleanup
    super
  end

  def worker(url, *args, env: {}, name: "worker")
    log = File.join(@ledger_dir, "#{name}.log")
    (@workers ||= []) << WorkerProcess.new(redis_url: url, namespace: @namespace, log: log, args: args, env: env).start
    @workers.last
  end

  def completions(label) = ledger_lines.count { |l| l.start_with?("#{label} ") }

  def stop_cleanly(worker)
    worker.signal("TERM")
    assert_equal 0, worker.wait.exitstatus, File.read(worker.log)
  end

  # Item 2: the fetcher's claim is black-holed, its connection given up and
  # the claim handed back by stamp (nothing to hand back yet); then the held
  # request reaches Redis and claims a job for this live node, answered to
  # nobody. The node's next heartbeat hands that job back.
  def test_a_claim_that_reaches_redis_after_its_connection_was_given_up_is_handed_back
    @proxy = FaultProxy.new(REDIS.port).start
    path = ledger_path
    w = worker(@proxy.url, "--concurrency", "1",
               env: {"SOLID_JOBS_TEST_PREFETCH" => "1", "SOLID_JOBS_TEST_RECOVERY_DELAY" => "5"})
    node = eventually("registered") { w.node_id(redis) }
    SlowTask.enqueue(path, "a", 1.5)
    eventually("a started") { ledger_lines.include?("start a") }
    SlowTask.enqueue_many(%w[b c d].map { |l| [path, l, 0.3] })
    # b prefetched (the window is 1), c and d ready.
    eventually("b prefetched") { redis.llen(key("channel:default")) == 2 && redis.hlen(key("claims:#{node}")) == 2 }

    # The held call is the fetcher's first ack_claim.lua (it carries a's
    # completion): loaded here, or it would be refused NOSCRIPT when it
    # arrives, and no one reads that reply to load it and send it again.
    redis.script(:load, CommandCounts::ScriptNames.sources.fetch("ack_claim"))
    @proxy.hold_existing!
    # a finishes, the worker takes b and the fetcher claims again: held.
    eventually("a claim is held in flight") { @proxy.held_request?(/#{@namespace}:fence/) }
    @proxy.disconnect_held_clients!
    # The fetcher gives the call up, hands back its stamp (nothing was
    # claimed yet) and claims c on a new connection.
    eventually("c claimed anew") { redis.llen(key("channel:default")) == 1 }
    @proxy.release_held!
    # The late request claims d under the node's id; its reply goes nowhere.
    eventually("the late claim arrived") { redis.llen(key("channel:default")).zero? }

    eventually("every job ran, the late-claimed one too", timeout: 15) { %w[a b c d].all? { |l| completions(l) >= 1 } }
    %w[a b c d].each { |l| assert_equal 1, completions(l), "#{l} ran once" }
    eventually("nothing left claimed") { redis.hlen(key("claims:#{node}")).zero? }
    assert_match(/handed back 1 job\(s\) claimed under this node that it does not hold/, File.read(w.log))
    stop_cleanly(w)
  end

  # Item 2: IntegrityCheck names a claim recorded under a live node that the
  # node did not hold at its last heartbeat (what the late claim above
  # leaves until that node's next heartbeat).
  def test_integrity_check_reports_claims_a_live_node_does_not_hold
    configure_solid_jobs(heartbeat_interval: 2, recovery_delay: 6)
    path = ledger_path
    start_conductor
    node = @conductor.node_id
    LedgerTask.enqueue(path, "held")
    eventually("held ran") { completions("held") == 1 }
    assert SolidJobs::IntegrityCheck.run.ok?, "nothing unheld yet"
    # Right after a heartbeat, a claim arrives with a stamp older than it.
    checked = ->(r) { r&.split("|", 3)&.[](1) }
    seen = checked.(redis.get(key("holding:#{node}")))
    record = eventually("a fresh heartbeat") { (r = redis.get(key("holding:#{node}"))) && checked.(r) != seen && r }
    floor = record.split("|", 2).first.to_i
    envelope = SolidJobs::Native::Client.build("LedgerTask", [path, "late"], "default", 3, nil)
    token = redis.incr(key("fence"))
    redis.hset(key("claims:#{node}"), token.to_s, "default|#{floor - 1}|#{JSON.generate(envelope)}")

    report = SolidJobs::IntegrityCheck.run
    refute report.ok?
    assert_equal [{node_id: node, token: token, channel: "default", claimed_ms: floor - 1, job_id: envelope["id"]}],
                 report.unheld_claims
    assert_empty report.dead_node_claims
    assert_empty report.orphaned_claims
    # The node's next heartbeat hands it back; it runs, and all is well.
    eventually("the unheld claim ran", timeout: 10) { completions("late") == 1 }
    assert SolidJobs::IntegrityCheck.run.ok?
  end

  # Item 3: Redis restarted from an older RDB: claims the node had already
  # completed come back. The node hands them back (they run again: their
  # completions were lost with the rollback), and tokens handed out after
  # the rollback stay above every earlier one although the counter went
  # back.
  def test_a_redis_restored_from_an_older_snapshot_is_reconciled_and_tokens_do_not_repeat
    @private_redis = RedisServer.new.start
    url = @private_redis.url
    configure_solid_jobs(redis_url: url)
    direct = Redis.new(url: url)
    path = ledger_path
    w = worker(url, "--concurrency", "2", env: {"SOLID_JOBS_TEST_PREFETCH" => "2", "SOLID_JOBS_TEST_RECOVERY_DELAY" => "5"})
    node = eventually("registered") { w.node_id(direct) }
    SlowTask.enqueue_many(Array.new(6) { |i| [path, "r#{i}", 0.4] })
    eventually("jobs claimed") { direct.hlen(key("claims:#{node}")) >= 3 }
    # What the snapshot holds: read on both sides of the SAVE (the worker
    # claims and acks meanwhile; SAVE cannot run in a MULTI), kept when
    # nothing moved in between.
    snapshot = File.join(@ledger_dir, "older.rdb")
    claimed_then, fence_then = eventually("a snapshot of a still moment") do
      before = [direct.hlen(key("claims:#{node}")), direct.get(key("fence")).to_i]
      direct.save
      FileUtils.cp(File.join(@private_redis.dir, "dump.rdb"), snapshot)
      before if before == [direct.hlen(key("claims:#{node}")), direct.get(key("fence")).to_i]
    end
    eventually("every job ran") { (0...6).all? { |i| completions("r#{i}") >= 1 } }
    eventually("idle, nothing claimed") { direct.hlen(key("claims:#{node}")).zero? }
    fence_before = direct.get(key("fence")).to_i
    assert_operator fence_before, :>, fence_then

    # The rollback: Redis comes back with the older data. The worker is
    # paused meanwhile, so what the rollback brought back is read before it
    # claims the jobs that came back ready (or hands back the claims).
    w.pause
    @private_redis.kill!
    FileUtils.cp(snapshot, File.join(@private_redis.dir, "dump.rdb"))
    @private_redis.start
    direct = Redis.new(url: url)
    assert_equal claimed_then, direct.hlen(key("claims:#{node}")), "the rollback brought back completed claims"
    assert_equal fence_then, direct.get(key("fence")).to_i, "and the fence counter went back"
    # The first token after the rollback (claimed here, on a channel the
    # worker does not serve) is above every token handed out before it.
    CriticalTask.enqueue(path, "probe")
    probe = SolidJobs.routing.backend_for("critical").claim("critical")
    assert_operator probe.fence, :>, fence_before, "a token handed out again after the rollback"
    SolidJobs.routing.backend_for("critical").ack(probe)
    w.resume

    eventually("the claims brought back were handed back", timeout: 15) { direct.hlen(key("claims:#{node}")).zero? }
    eventually("and ran again", timeout: 15) do
      direct.llen(key("channel:default")).zero? && direct.hlen(key("claims:#{node}")).zero?
    end
    SlowTask.enqueue(path, "after", 0)
    eventually("a job after the rollback ran") { completions("after") == 1 }
    log = File.read(w.log)
    assert_match(/handed back \d+ job\(s\) claimed under this node that it does not hold/, log)
    # Its heartbeat record was older than one Redis had acknowledged.
    assert_match(/Redis went back in time: writes it had acknowledged are gone/, log)
    stop_cleanly(w)
  end

  # Item 3: Redis restarted without persistence: every key is gone, and the
  # worker says so in plain words, then carries on with new work.
  def test_a_redis_that_lost_the_namespace_is_reported_in_plain_words
    @private_redis = RedisServer.new.start
    url = @private_redis.url
    configure_solid_jobs(redis_url: url)
    path = ledger_path
    w = worker(url, "--concurrency", "1")
    eventually("registered") { w.node_id(Redis.new(url: url)) }
    LedgerTask.enqueue(path, "before")
    eventually("before ran") { completions("before") == 1 }
    @private_redis.stop
    @private_redis.start
    eventually("the loss is logged", timeout: 15) { File.read(w.log).include?("Redis lost all SolidJobs data in namespace") }
    assert_match(/Redis lost all SolidJobs data in namespace "#{@namespace}": every key is gone/, File.read(w.log))
    LedgerTask.enqueue(path, "after")
    eventually("after ran") { completions("after") == 1 }
    stop_cleanly(w)
  end

  # Item 6: replies to completion batches are cut mid-way, so the acker
  # resends batches whose first attempt applied: recognised as applied, not
  # counted or logged as stale.
  def test_resent_completions_whose_first_attempt_applied_are_not_stale
    @proxy = FaultProxy.new(REDIS.port).start
    path = ledger_path
    w = worker(@proxy.url, "--concurrency", "2")
    eventually("registered") { w.node_id(redis) }
    5.times do |round|
      # ack.lua and ack_claim.lua are the scripts that name the processed
      # metric: a completion written alone or carried by a claim.
      @proxy.cut_replies(1, request: /#{@namespace}:metric:processed/)
      LedgerTask.enqueue_many(Array.new(5) { |i| [path, "j#{round}-#{i}"] })
      eventually("round #{round} acknowledged") { redis.get(key("metric:processed")).to_i == 5 * (round + 1) }
    end
    assert_equal 5, @proxy.cuts_done, "every cut hit a completion reply"
    assert_equal 25, ledger_lines.size, "each job ran once"
    assert_equal 0, redis.get(key("metric:stale")).to_i, "no resent completion counted as stale"
    stop_cleanly(w)
    refute_match(/stale/, File.read(w.log))
  end

  # Decision 51: a claim carrying completions (ack_claim.lua) applies in
  # Redis and its reply is cut. Both halves are recovered as they are
  # alone: the claim's jobs go back to their list by the call's stamp and
  # run once, later; the acker resends the completions, alone and
  # unchanged, and the marker the lost call wrote recognises them as
  # applied, not stale.
  def test_a_claim_carrying_completions_whose_reply_is_cut_loses_and_repeats_nothing
    @proxy = FaultProxy.new(REDIS.port).start
    path = ledger_path
    w = worker(@proxy.url, "--concurrency", "1", env: {"SOLID_JOBS_TEST_PREFETCH" => "1"})
    node = eventually("registered") { w.node_id(redis) }
    # Loaded first, so no cut falls on a NOSCRIPT reply (a call that did
    # not run).
    redis.script(:load, CommandCounts::ScriptNames.sources.fetch("ack_claim"))
    # The request names the completions' processed metric and, after it,
    # the claim's fence counter: ack_claim.lua and nothing else.
    @proxy.cut_replies(3, request: /#{@namespace}:metric:processed[\s\S]*#{@namespace}:fence/)
    labels = Array.new(8) { |i| "c#{i}" }
    SlowTask.enqueue_many(labels.map { |l| [path, l, 0.05] })
    eventually("all acknowledged") { redis.get(key("metric:processed")).to_i == labels.size }
    assert_equal 3, @proxy.cuts_done, "three claims carrying completions lost their replies"
    finished = ledger_lines.reject { |l| l.start_with?("start ") }.map { |l| l.split.first }
    assert_equal labels, finished.sort, "each job ran exactly once"
    assert_equal 0, redis.get(key("metric:stale")).to_i, "no resent completion counted as stale"
    assert_equal 0, redis.llen(key("channel:default")), "nothing left ready"
    assert_equal 0, redis.hlen(key("claims:#{node}")), "nothing left claimed"
    stop_cleanly(w)
    log = File.read(w.log)
    refute_match(/stale/, log)
    assert_match(/requeued \d+ job\(s\) claimed by a call whose reply was lost/, log)
  end

  # Item 6 on SolidEngine: ACKMANY replies cut mid-way, the acker resends
  # them; the engine answers "acked already" for a batch that applied.
  def test_resent_engine_completions_whose_first_attempt_applied_are_not_stale
    port = RedisServer.free_port
    @engine = EngineServer.new(extra: ["--listen", "tcp://127.0.0.1:#{port}"]).start
    @proxy = FaultProxy.new(port).start
    url = "tcp://127.0.0.1:#{@proxy.port}"
    configure_solid_jobs(backend: :solid_engine, url: @engine.url,
                         backends: {solid_engine: {adapter: :solid_engine, url: @engine.url, lease: 30.0}})
    path = ledger_path
    log = File.join(@ledger_dir, "engine-worker.log")
    w = WorkerProcess.new(redis_url: "redis://127.0.0.1:#{RedisServer.closed_port}/0", namespace: @namespace, log: log,
                          args: %w[--concurrency 2], env: {"SOLID_JOBS_TEST_ENGINE_URL" => url}).start
    (@workers ||= []) << w
    ids = []
    5.times do |round|
      @proxy.cut_replies(1, request: /ACKMANY/)
      ids += LedgerTask.enqueue_many(Array.new(5) { |i| [path, "e#{round}-#{i}"] })
      backend = SolidJobs.routing.backend_for("default")
      eventually("round #{round} acknowledged") { ids.all? { |id| backend.get_job(id)&.fetch("state") == "completed" } }
    end
    assert_equal 5, @proxy.cuts_done, "every cut hit a completion reply"
    assert_equal 25, ledger_lines.size, "each job ran once"
    stop_cleanly(w)
    refute_match(/stale/, File.read(w.log))
  end
end
