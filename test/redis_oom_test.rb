# frozen_string_literal: true

require_relative "test_helper"

# Redis out of memory (docs/reliability.md, "Redis out of memory"): with
# `maxmemory` reached and `noeviction`, producers are refused, and workers
# keep heartbeating, claiming, acknowledging, retrying, promoting and
# recovering, since draining is what frees memory. A private Redis, so the
# limit touches no other test.
class RedisOutOfMemoryTest < SolidJobsTest
  BACKLOG = 800
  PADDING = "x" * 2_000
  BALLAST_BYTES = 3_000_000

  def setup
    super
    @server = RedisServer.new.start
    @r = Redis.new(url: @server.url)
    configure_solid_jobs(redis_url: @server.url)
    @workers = []
  end

  def teardown
    @workers&.each(&:kill!)
    super
    @r&.close
    @server&.cleanup
  end

  def test_workers_drain_and_recover_while_redis_is_out_of_memory_and_producers_get_a_clear_error
    dead_id = kill_a_worker_holding_claims
    running = start_worker("running")
    eventually("the running worker registered") { running.node_id(@r) }

    # Memory that draining does not free keeps Redis over its limit for the
    # whole test (SETRANGE allocates it inside Redis: a 3 MB SET would also
    # leave a 3 MB query buffer behind for a while, counted as used memory).
    # The backlog, and a job that fails twice before it is archived, become
    # due once the limit is in force.
    @r.setrange("ballast", BALLAST_BYTES - 1, "b")
    limit = used_memory - 500_000
    BACKLOG.times { |i| BallastTask.enqueue_after(1.5, ledger_path, "b-#{i}", PADDING) }
    ImportCatalog.enqueue_after(1.5, ledger_path, "failing", "custom") # 3 attempts, 0.05 s apart, then archived
    @r.config(:set, "maxmemory", limit.to_s)
    assert_operator used_memory, :>, limit

    refused = assert_raises(SolidJobs::OutOfMemoryError) { LedgerTask.enqueue(ledger_path, "refused") }
    assert_kind_of SolidJobs::RedisError, refused
    assert_match(/out of memory.*OOM/, refused.message)

    # Started while Redis is over its limit: it registers (heartbeats may
    # run out of memory) and works, instead of exiting 1.
    started = start_worker("started-over-limit")
    over_limit_since = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    workers = [running, started]
    eventually("the backlog, the failing job and the dead node's claims are done", timeout: 40) do
      workers.each { |w| flunk("a worker exited:\n#{File.read(w.log)}") if exited?(w) }
      all_done?(dead_id)
    end
    assert_equal 0, @r.exists(key("claims:#{dead_id}")), "the dead node's claims were recovered"

    # Their own heartbeats kept both alive for over twice the recovery
    # delay (2 s), all under the limit.
    sleep([over_limit_since + 5 - Process.clock_gettime(Process::CLOCK_MONOTONIC), 0].max)
    assert_operator used_memory, :>, limit, "still out of memory"
    assert_raises(SolidJobs::OutOfMemoryError) { LedgerTask.enqueue(ledger_path, "still refused") }
    workers.each do |w|
      id = w.node_id(@r)
      assert id, "the node key of #{w.log} is alive"
      assert_operator @r.pttl(key("node:#{id}")), :>, 0
    end

    logs = workers.map { |w| File.read(w.log) }
    logs.each do |log|
      refute_match(/was this process paused/, log)
      refute_match(/\.rb:\d+:in /, log, "no backtrace")
      # What could not be written (the node's telemetry) is reported naming
      # the cause, once per 30 s at most.
      assert_operator log.lines.grep(/out of memory.*OOM/).size, :<=, 3, "rate-limited:\n#{log}"
    end
    assert logs.any? { |log| log.match?(/out of memory.*OOM/) }, "a warning names OOM:\n#{logs.join}"

    # Once memory is free again, producers write again.
    @r.del("ballast")
    eventually("an enqueue is accepted again") do
      LedgerTask.enqueue(ledger_path, "after")
    rescue SolidJobs::OutOfMemoryError
      false
    end
    eventually("the new job ran") { ledger_lines.any? { |l| l.start_with?("after ") } }
    workers.each { |w| w.signal("TERM") }
    statuses = workers.map { |w| w.wait(timeout: 20) }
    assert statuses.all?(&:success?), statuses.inspect
  end

  private

  def used_memory = @r.info("memory")["used_memory"].to_i

  # The backlog ran, the failing job was archived after its 3 attempts, and
  # the dead node's four jobs ran after its claims were recovered.
  def all_done?(dead_id)
    lines = ledger_lines
    ran = ->(label) { lines.any? { |l| l.start_with?("#{label} ") } }
    lines.count { |l| l.start_with?("b-") } == BACKLOG && %w[v-slow v-1 v-2 v-3].all?(&ran) &&
      lines.count("attempt failing") == 3 && @r.zcard(key("archive")) == 1 && !@r.sismember(key("nodes"), dead_id)
  end

  def start_worker(name, env: {}, args: [])
    worker = WorkerProcess.new(redis_url: @server.url, namespace: @namespace, log: File.join(@ledger_dir, "#{name}.log"),
                               env: env, args: args).start
    @workers << worker
    worker
  end

  def exited?(worker)
    Process.wait(worker.pid, Process::WNOHANG)
  rescue Errno::ECHILD
    true
  end

  # A worker that claimed a slow job and three more (prefetched behind it),
  # then SIGKILLed: its claims wait for recovery. Returns its node id.
  def kill_a_worker_holding_claims
    victim = start_worker("victim", env: {"SOLID_JOBS_TEST_PREFETCH" => "4"}, args: ["--concurrency", "1"])
    OverrunOnceTask.enqueue(ledger_path, "v-slow", 30)
    (1..3).each { |i| LedgerTask.enqueue(ledger_path, "v-#{i}") }
    eventually("the victim started the slow job") { ledger_lines.include?("start v-slow") }
    id = eventually("the victim registered") { victim.node_id(@r) }
    eventually("the victim holds its claims") { @r.hlen(key("claims:#{id}")) == 4 }
    victim.kill!
    id
  end
end
