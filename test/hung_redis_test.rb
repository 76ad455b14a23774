# frozen_string_literal: true

require_relative "test_helper"
require_relative "support/fault_proxy"

# A backend that accepts connections and never answers: Redis or
# SolidEngine paused with SIGSTOP (the kernel still completes TCP and Unix
# handshakes from the listen backlog), or a black-holed proxy. Every call
# must fail within the connection timeouts, producers and workers must
# honour TERM and INT, and a stopping worker must be gone within
# shutdown_timeout plus its grace, leaving what it could not hand back to
# recovery. Real servers, real worker processes, real signals.
class HungRedisTest < SolidJobsTest
  GRACE = SolidJobs::Conductor::SHUTDOWN_GRACE
  SECOND_SIGNAL_GRACE = SolidJobs::Conductor::SECOND_SIGNAL_GRACE
  # Above each bound, for a loaded host: a bound missed by more than this
  # is a hang, not scheduling noise.
  SLACK = 2.0

  def setup
    super
    @servers = []
    @workers = []
    @proxies = []
  end

  def teardown
    @workers.each do |w|
      w.signal("KILL")
      w.wait(timeout: 5)
    end
    @proxies.each(&:close)
    @redis_at&.each_value(&:close)
    @servers.each(&:cleanup)
    super
  end

  def private_redis
    (@servers << RedisServer.new.start).last
  end

  def private_engine(**options)
    (@servers << EngineServer.new(**options).start).last
  end

  def worker(url, *args, name: "worker", env: {})
    log = File.join(@ledger_dir, "#{name}.log")
    w = WorkerProcess.new(redis_url: url, namespace: @namespace, log: log, args: args, env: env).start
    (@workers << w).last
  end

  def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)

  # Whether a connection to `port` holds request bytes the server has not
  # read (a stopped Redis reads nothing): the kernel's receive queue.
  def unanswered_request?(port)
    %w[/proc/net/tcp /proc/net/tcp6].any? do |table|
      File.exist?(table) && File.readlines(table).drop(1).any? do |row|
        local, _remote, state, queues = row.split[1, 4]
        local.end_with?(format(":%04X", port)) && state == "01" && queues.split(":").last.to_i(16).positive?
      end
    end
  end

  # Runs the block in a thread; fails when it is still blocked after
  # `limit` seconds (the hang this file is about). Returns what the block
  # returned or raised, and how long it took.
  def bounded(limit)
    started = now
    thread = Thread.new do
      yield
    rescue StandardError => e
      e
    end
    flunk("still blocked after #{limit}s") unless thread.join(limit)
    [thread.value, now - started]
  end

  # Waits for a worker's exit; fails (after a SIGKILL) when it takes longer
  # than `limit` seconds. Returns the status and how long it took.
  def exits_within(worker, limit)
    started = now
    status = worker.wait(timeout: limit)
    [status, now - started]
  end

  def redis_at(server, db = 0) = ((@redis_at ||= {})[[server, db]] ||= Redis.new(url: server.url(db)))
  def claims_at(server) = redis_at(server).keys(key("claims:*")).sum { |k| redis_at(server).hlen(k) }
  def completed(label) = ledger_lines.count { |l| l.start_with?("#{label} ") }

  def test_enqueue_to_a_paused_redis_raises_connection_error_within_the_read_timeout
    server = private_redis
    # Database 3: a new connection's handshake (SELECT) runs under the timeouts too.
    configure_solid_jobs(redis_url: server.url(3), read_timeout: 1, connect_timeout: 1)
    LedgerTask.enqueue(ledger_path, "before") # leaves a pooled connection
    server.pause

    error, took = bounded(1 + SLACK) { LedgerTask.enqueue(ledger_path, "pooled") }
    assert_kind_of SolidJobs::ConnectionError, error
    assert_match(/timed out.*read 1s/, error.message)
    assert_operator took, :>=, 0.9, "it waited for the read timeout"

    # A new client (other timeouts) connects afresh: the handshake is bounded too.
    configure_solid_jobs(redis_url: server.url(3), read_timeout: 1.5, connect_timeout: 1)
    error, = bounded(1.5 + SLACK) { LedgerTask.enqueue(ledger_path, "fresh") }
    assert_kind_of SolidJobs::ConnectionError, error
    assert_match(/timed out.*read 1.5s/, error.message)

    server.resume
    LedgerTask.enqueue(ledger_path, "after")
    assert_operator redis_at(server, 3).llen(key("channel:default")), :>=, 2
  end

  def test_enqueue_through_a_black_holed_proxy_raises_connection_error_within_the_read_timeout
    server = private_redis
    proxy = FaultProxy.new(server.port).start
    @proxies << proxy
    configure_solid_jobs(redis_url: proxy.url, read_timeout: 1, connect_timeout: 1)
    LedgerTask.enqueue(ledger_path, "before")
    proxy.blackhole = true
    error, = bounded(1 + SLACK) { LedgerTask.enqueue(ledger_path, "held") }
    assert_kind_of SolidJobs::ConnectionError, error
    proxy.blackhole = false
    LedgerTask.enqueue(ledger_path, "after")
  end

  # A producer process blocked on a hung Redis ends on TERM or INT: when the
  # blocked call returns (one read timeout) and Ruby runs the signal's
  # handler, then its exit-time telemetry flush (at most one more).
  def test_a_producer_blocked_on_a_paused_redis_honours_term_and_int
    server = private_redis
    script = <<~RUBY
      require "solid_jobs"
      require #{File.join(ROOT, "test/support/tasks").dump}
      SolidJobs.configure { |c| c.redis_url = #{server.url.dump}; c.namespace = #{@namespace.dump}; c.read_timeout = 1 }
      LedgerTask.enqueue("x", "ready")
      $stdout.puts("ready")
      $stdout.flush
      loop do
        LedgerTask.enqueue("x", "again")
      rescue SolidJobs::ConnectionError
        nil
      end
    RUBY
    %w[TERM INT].each do |signal|
      server.resume
      out_r, out_w = IO.pipe
      pid = Process.spawn(RbConfig.ruby, "-I", File.join(ROOT, "lib"), "-e", script, out: out_w, err: File::NULL)
      out_w.close
      assert_equal "ready", out_r.gets&.chomp, "the producer started"
      server.pause
      eventually("the producer inside an enqueue that never gets an answer") { unanswered_request?(server.port) }
      Process.kill(signal, pid)
      started = now
      exited = Process.wait2(pid, Process::WNOHANG)
      until exited || now - started > 2 + SLACK
        sleep 0.02 # poll interval of the bounded wait for the exit
        exited = Process.wait2(pid, Process::WNOHANG)
      end
      flunk("the producer ignored #{signal} for #{2 + SLACK}s") unless exited
      pid = nil
      refute exited.last.success?, "ended by #{signal}"
    ensure
      out_r&.close
      # A producer left running loops on enqueue for good: never leak it.
      if pid
        Process.kill("KILL", pid)
        Process.wait(pid)
      end
    end
  end

  def test_a_worker_honours_term_when_redis_never_answers_and_its_claims_are_recovered
    server = private_redis
    configure_solid_jobs(redis_url: server.url)
    path = ledger_path
    # Two tasks still running at the timeout (they finish at once when run
    # again), four prefetched behind them.
    OverrunOnceTask.enqueue_many([[path, "j0", 30], [path, "j1", 30]])
    LedgerTask.enqueue_many(Array.new(4) { |i| [path, "j#{i + 2}"] })
    w = worker(server.url, "--concurrency", "2", "--shutdown-timeout", "1")
    eventually("two tasks running") { ledger_lines.count { |l| l.start_with?("start ") } == 2 }
    eventually("claims held") { claims_at(server) == 6 }
    server.pause

    w.signal("TERM")
    status, took = exits_within(w, 1 + GRACE + SLACK)
    assert_equal 0, status.exitstatus, File.read(w.log)
    assert_operator took, :<, 1 + GRACE + SLACK
    assert_match(/left for recovery/, File.read(w.log))

    # Redis comes back: another node runs every job, the two that were
    # running included; nothing stays claimed.
    server.resume
    worker(server.url, "--concurrency", "2", name: "rescuer")
    eventually("every job completed") { 6.times.all? { |i| completed("j#{i}") >= 1 } }
    eventually("nothing left claimed") { claims_at(server).zero? }
    assert_equal 0, redis_at(server).llen(key("channel:default"))
  end

  def test_a_second_term_exits_at_once_when_redis_never_answers
    server = private_redis
    configure_solid_jobs(redis_url: server.url)
    path = ledger_path
    SlowTask.enqueue(path, "long", 30)
    w = worker(server.url, "--concurrency", "1", "--shutdown-timeout", "30")
    eventually("task started") { ledger_lines.include?("start long") }
    server.pause
    w.signal("TERM")
    eventually("first signal seen") { File.read(w.log).include?("stopping") }
    w.signal("TERM")
    status, took = exits_within(w, SECOND_SIGNAL_GRACE + SLACK)
    assert_equal 0, status.exitstatus, File.read(w.log)
    assert_operator took, :<, SECOND_SIGNAL_GRACE + SLACK
  end

  def test_a_worker_started_against_a_paused_redis_waits_and_honours_term
    server = private_redis
    server.pause
    w = worker(server.url, "--concurrency", "1", env: {"SOLID_JOBS_TEST_READ_TIMEOUT" => "1"})
    eventually("waiting for Redis", timeout: 15) { File.read(w.log).include?("waiting for Redis") }
    assert_match(/timed out/, File.read(w.log))
    w.signal("TERM")
    status, = exits_within(w, 1 + SLACK)
    assert_equal 0, status.exitstatus, File.read(w.log)
  end

  # The same defect class on SolidEngine connections: its client and its
  # worker source use the same connector, AUTH included.
  def test_a_paused_solid_engine_fails_enqueues_in_time_and_a_worker_still_stops
    engine = private_engine(password: "s3cret")
    backends = {solid_engine: {adapter: :solid_engine, url: engine.url, password: "s3cret", lease: 30.0}}
    configure_solid_jobs(backend: :solid_engine, url: engine.url, backends: backends, read_timeout: 1)
    path = ledger_path
    SlowTask.enqueue(path, "engine-long", 30)
    w = worker("redis://127.0.0.1:#{RedisServer.closed_port}/0", "--concurrency", "1", "--shutdown-timeout", "1",
               env: {"SOLID_JOBS_TEST_ENGINE_URL" => engine.url, "SOLID_JOBS_TEST_ENGINE_PASSWORD" => "s3cret"})
    eventually("task started") { ledger_lines.include?("start engine-long") }
    engine.pause

    error, = bounded(1 + SLACK) { LedgerTask.enqueue(path, "pooled") }
    assert_kind_of SolidJobs::ConnectionError, error
    # A fresh connection: AUTH is sent under the timeouts.
    configure_solid_jobs(backend: :solid_engine, url: engine.url, backends: backends, read_timeout: 1.5)
    error, = bounded(1.5 + SLACK) { LedgerTask.enqueue(path, "fresh") }
    assert_kind_of SolidJobs::ConnectionError, error

    w.signal("TERM")
    status, took = exits_within(w, 1 + GRACE + SLACK)
    assert_equal 0, status.exitstatus, File.read(w.log)
    assert_operator took, :<, 1 + GRACE + SLACK
  end
end
