# frozen_string_literal: true

require_relative "test_helper"

# The SolidEngine backend with a real server process and real worker
# processes: leases, fencing, connection errors, graceful stop, durability.
class SolidEngineReliabilityTest < SolidJobsTest
  def setup
    super
    @servers = []
  end

  def teardown
    @workers&.each { |w| w.signal("KILL") && w.wait(timeout: 5) }
    super
    @servers.each(&:cleanup)
  end

  def engine(**options)
    @servers << EngineServer.new(**options).start
    @servers.last
  end

  def route_to(server)
    configure_solid_jobs(backend: :solid_engine, url: server.url,
                         backends: {solid_engine: {adapter: :solid_engine, url: server.url, lease: 1.0}})
  end

  def worker(server, *args, name: "worker", lease: "1.0", prefetch: nil)
    log = File.join(@ledger_dir, "#{name}.log")
    env = {"SOLID_JOBS_TEST_ENGINE_URL" => server.url, "SOLID_JOBS_TEST_LEASE" => lease}
    env["SOLID_JOBS_TEST_PREFETCH"] = prefetch.to_s if prefetch
    # Redis is never touched: point it at a closed port to prove it.
    w = WorkerProcess.new(redis_url: "redis://127.0.0.1:#{RedisServer.closed_port}/0", namespace: @namespace, log: log,
                          args: args, env: env).start
    (@workers ||= []) << w
    w
  end

  def completions(label) = ledger_lines.count { |l| l.start_with?("#{label} ") }
  def backend = SolidJobs.routing.backend_for("default")

  def test_jobs_run_through_solid_engine_without_redis
    server = engine
    route_to(server)
    path = ledger_path
    ids = CpuTask.enqueue_many(Array.new(20) { |i| [path, "e#{i}", 10_000] })
    w = worker(server, "--concurrency", "2")
    eventually("20 jobs ran") { ledger_lines.size == 20 }
    eventually("all completed on the engine") { ids.all? { |id| backend.get_job(id)&.fetch("state") == "completed" } }
    w.signal("TERM")
    assert_equal 0, w.wait.exitstatus, File.read(w.log)
  end

  def test_one_process_works_channels_on_both_backends
    server = engine
    configure_solid_jobs(
      channels: %w[critical default],
      backend: :redis,
      backends: {engine: {adapter: :solid_engine, url: server.url}},
      channel_backends: {"default" => :engine}
    )
    path = ledger_path
    on_redis = CriticalTask.enqueue(path, "via-redis")
    on_engine = LedgerTask.enqueue(path, "via-engine")
    assert_equal 1, redis.llen(key("channel:critical"))
    assert_equal "ready", SolidJobs.routing.backend_for("default").get_job(on_engine)["state"]
    start_conductor
    eventually("both ran") { completions("via-redis") == 1 && completions("via-engine") == 1 }
    eventually("both completed") do
      redis.get(key("metric:processed")).to_i == 1 &&
        SolidJobs.routing.backend_for("default").get_job(on_engine)["state"] == "completed"
    end
    assert_nil SolidJobs.routing.backend_for("critical").get_job(on_redis), "completed on Redis"
  end

  def test_sigkilled_worker_loses_its_lease_and_the_job_runs_again
    server = engine(lease_ms: 1000)
    route_to(server)
    path = ledger_path
    id = SlowTask.enqueue(path, "leased", 5)
    victim = worker(server, "--concurrency", "1", name: "victim", lease: "1.0")
    eventually("victim started it") { ledger_lines.include?("start leased") }
    assert_equal "reserved", backend.get_job(id)["state"]
    victim.kill!
    killed_at = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    rescuer = worker(server, "--concurrency", "1", name: "rescuer", lease: "30")
    eventually("ran again after the lease", timeout: 30) { completions("leased") == 1 }
    assert_operator Process.clock_gettime(Process::CLOCK_MONOTONIC) - killed_at, :>=, 0.9, "redelivered before the lease ended"
    assert_equal rescuer.pid.to_s, ledger_lines.find { |l| l.start_with?("leased ") }.split[2]
    eventually("completed") { backend.get_job(id)["state"] == "completed" }
    assert_operator backend.get_job(id)["attempts"], :>=, 2
  end

  def test_leases_of_prefetched_jobs_are_extended_while_they_wait
    server = engine
    route_to(server)
    path = ledger_path
    ids = SlowTask.enqueue_many(Array.new(4) { |i| [path, "w#{i}", 0.4] })
    # One worker, four prefetched, a 0.6 s lease: the last job waits ~1.2 s
    # in the buffer, twice its lease, before a worker takes it.
    w = worker(server, "--concurrency", "1", lease: "0.6", prefetch: 4)
    eventually("all ran", timeout: 30) { (0...4).all? { |i| completions("w#{i}") >= 1 } }
    eventually("all completed") { ids.all? { |id| backend.get_job(id)["state"] == "completed" } }
    4.times { |i| assert_equal 1, completions("w#{i}"), "w#{i} was redelivered while it waited" }
    assert_equal [1], ids.map { |id| backend.get_job(id)["attempts"] }.uniq
    w.signal("TERM")
    assert_equal 0, w.wait.exitstatus
  end

  def test_stale_ack_is_rejected_and_ignored_by_the_worker
    server = engine(lease_ms: 500)
    route_to(server)
    path = ledger_path
    id = OverrunOnceTask.enqueue(path, "overran", 2)
    # The server's default lease of 0.5 s and no extension (lease 0): the
    # first run overruns its lease, the job is redelivered and completes, and
    # the first run's completion arrives stale.
    w = worker(server, "--concurrency", "2", lease: "0")
    eventually("ran twice", timeout: 30) { completions("overran") == 2 }
    eventually("completed once") { backend.get_job(id)["state"] == "completed" }
    # The first run writes its ledger line before it acks: the stale reply
    # and its log line come after, within a round trip.
    eventually("the stale completion logged (#{w.log_tail})", timeout: 10) { File.read(w.log).match?(/stale/) }
    assert Process.kill(0, w.pid), "the worker is still running"
  end

  def test_connection_errors_do_not_stop_a_worker
    server = engine(durability: "strict")
    route_to(server)
    path = ledger_path
    SlowTask.enqueue_many(Array.new(6) { |i| [path, "c#{i}", 0.2] })
    w = worker(server, "--concurrency", "2")
    eventually("some ran") { ledger_lines.count { |l| l.start_with?("c") && !l.start_with?("start") } >= 1 }
    server.stop("KILL") # returns once the server is gone: the worker's connections are broken
    sleep 0.5 # the outage: the server stays down a while, so the worker's reconnects are refused
    server.start
    eventually("every job ran after the server came back", timeout: 60) { (0...6).all? { |i| completions("c#{i}") >= 1 } }
    SlowTask.enqueue(path, "after-restart", 0)
    eventually("new work is claimed") { completions("after-restart") == 1 }
    w.signal("TERM")
    assert_equal 0, w.wait.exitstatus, File.read(w.log)
  end

  def test_stop_lets_the_running_job_finish_and_claims_nothing_new
    server = engine
    route_to(server)
    path = ledger_path
    w = worker(server, "--concurrency", "1")
    first = SlowTask.enqueue(path, "running", 1.0)
    eventually("started") { ledger_lines.include?("start running") }
    later = SlowTask.enqueue(path, "later", 0)
    w.signal("TERM")
    assert_equal 0, w.wait.exitstatus, File.read(w.log)
    assert_equal 1, completions("running")
    assert_equal 0, completions("later")
    assert_equal "completed", backend.get_job(first)["state"]
    assert_includes %w[ready scheduled], backend.get_job(later)["state"], "handed back, never run"
  end

  def test_stop_releases_prefetched_jobs_without_charging_an_attempt
    server = engine
    route_to(server)
    path = ledger_path
    # A long lease, so the prefetched reservations are still held at the stop.
    w = worker(server, "--concurrency", "1", lease: "30", prefetch: 4)
    first = SlowTask.enqueue(path, "running", 1.5)
    eventually("started") { ledger_lines.include?("start running") }
    waiting = SlowTask.enqueue_many(Array.new(3) { |i| [path, "waiting#{i}", 0] })
    eventually("prefetched while the only worker is busy") { waiting.any? { |id| backend.get_job(id)["state"] == "reserved" } }
    w.signal("TERM")
    assert_equal 0, w.wait.exitstatus, File.read(w.log)
    assert_equal 1, completions("running")
    assert_equal "completed", backend.get_job(first)["state"]
    waiting.each_with_index do |id, i|
      assert_equal 0, completions("waiting#{i}")
      job = backend.get_job(id)
      assert_equal ["ready", 0], [job["state"], job["attempts"]], "job #{i} handed back unused: ready, no attempt charged"
    end
    stats = backend.client.call(["STATS"])
    assert_match(/^released_total:[1-3]\r?$/, stats)
    assert_match(/^retried_total:0\r?$/, stats)
  end

  def test_sigkill_of_a_strict_server_loses_no_confirmed_job
    server = engine(durability: "strict")
    route_to(server)
    ids = LedgerTask.enqueue_many(Array.new(300) { |i| ["/dev/null", "d#{i}"] })
    planned = LedgerTask.enqueue_after(3600, "/dev/null", "planned")
    server.kill!
    server.start
    states = ids.map { |id| backend.get_job(id)&.fetch("state") }
    assert_equal ["ready"], states.uniq
    assert_equal "scheduled", backend.get_job(planned)["state"]
  end

  def test_dedup_get_and_cancel
    server = engine
    route_to(server)
    id = LedgerTask.enqueue("/dev/null", "x")
    assert_equal 0, backend.client.call(["PUSH", backend.channel_id("default").to_s, id, "{}"]),
                 "an existing id is not pushed again"
    assert_equal "ready", backend.get_job(id)["state"]
    assert backend.cancel(id)
    refute backend.cancel(id)
    assert_equal "cancelled", backend.get_job(id)["state"]
    assert_nil backend.get_job(SecureRandom.uuid)
    assert backend.supports?(:lease_extension)
    refute SolidJobs::Backends::Redis.new(:redis, {}, SolidJobs.config).supports?(:lease_extension)
    assert_raises(SolidJobs::Backends::NotSupported) do
      SolidJobs::Backends::Redis.new(:redis, {}, SolidJobs.config).extend_lease(nil, 1)
    end
  end

  def test_retry_within_is_refused_on_solid_engine
    route_to(engine)
    error = assert_raises(SolidJobs::Backends::NotSupported) { WithinTask.enqueue("/dev/null") }
    assert_match(/retry_within/, error.message)
  end
end
