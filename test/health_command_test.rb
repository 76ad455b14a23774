# frozen_string_literal: true

require_relative "test_helper"
require_relative "support/fault_proxy"
require "solid_jobs/health"

# `solid-jobs health` the way a probe runs it: `bundle exec solid-jobs
# health` as a real process against a real Redis (up, stopped, hung behind a
# black-holed proxy) and real worker processes (live, paused, stopped). The
# exit code and the one line are what Kubernetes and Docker read.
class HealthCommandTest < SolidJobsTest
  APP = WorkerProcess::APP
  # A probe process starts Ruby and Bundler before its check: the time its
  # check may take on a loaded host on top of --timeout.
  STARTUP_SLACK = 5.0

  def setup
    super
    @workers = []
    @servers = []
    @proxies = []
  end

  def teardown
    @workers.each do |w|
      w.resume
      w.signal("KILL")
      w.wait(timeout: 5)
    end
    @proxies.each(&:close)
    @servers.each(&:cleanup)
    super
  end

  def worker(url = REDIS.url, env: {})
    w = WorkerProcess.new(redis_url: url, namespace: @namespace, log: File.join(@ledger_dir, "worker#{@workers.size}.log"),
                          env: env).start
    @workers << w
    registry = url == REDIS.url ? redis : Redis.new(url: url)
    eventually("the worker registered") { w.node_id(registry) }
    w
  end

  # [exit status, stdout, stderr, seconds]
  def health(*args, url: REDIS.url, env: {})
    started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    out, err, status = SolidJobsCommand.capture3({"SOLID_JOBS_TEST_NAMESPACE" => @namespace}.merge(env),
                                                 "health", "--require", APP, "--redis-url", url, *args)
    [status.exitstatus, out, err, Process.clock_gettime(Process::CLOCK_MONOTONIC) - started]
  end

  # The probe's contract: one line, on stdout when healthy, stderr otherwise.
  def assert_one_line(code, out, err, expected_code, pattern)
    text = expected_code.zero? ? out : err
    assert_equal expected_code, code, "exit code; stdout: #{out} stderr: #{err}"
    assert_equal 1, text.lines.size, "one line: #{text.inspect}"
    assert_empty(expected_code.zero? ? err : out)
    assert_match pattern, text
  end

  def test_a_live_worker_is_healthy_and_its_node_can_be_named
    w = worker
    id = w.node_id(redis)
    code, out, err, = health
    assert_one_line(code, out, err, 0, /\Asolid-jobs health: ok: redis \(redis\) answered in [\d.]+ ms; 1 fresh node\(s\)\n\z/)
    code, out, err, = health("--node", id)
    assert_one_line(code, out, err, 0, /ok: .*node #{id} heartbeat [\d.]+s ago/)
    code, out, err, = health("--local")
    assert_one_line(code, out, err, 0, /1 fresh node\(s\) on #{Regexp.escape(Socket.gethostname)}/)
  end

  # The probe reads the configuration file as a worker does: the file's
  # namespace beats the app's (no node lives there), and -e picks its
  # section.
  def test_the_configuration_file_is_read_as_by_workers
    worker
    file = File.join(@ledger_dir, "solid_jobs.yml")
    File.write(file, "production:\n  namespace: #{@namespace}_elsewhere\nstaging:\n  namespace: #{@namespace}\n")
    code, out, err, = health("-C", file, "-e", "production")
    assert_one_line(code, out, err, 2, /unhealthy: no live node/)
    code, out, err, = health("-C", file, "-e", "staging")
    assert_one_line(code, out, err, 0, /1 fresh node\(s\)/)
    code, _out, err, = health("-C", File.join(@ledger_dir, "missing.yml"))
    assert_equal 64, code
    assert_match(/missing\.yml: no such file/, err)
  end

  def test_no_node_or_an_unknown_node_is_unhealthy
    code, out, err, = health
    assert_one_line(code, out, err, 2, /unhealthy: no live node\n\z/)
    worker
    code, out, err, = health("--node", "no-such-node")
    assert_one_line(code, out, err, 2, /unhealthy: node no-such-node is not registered/)
  end

  def test_a_stopped_worker_leaves_no_live_node
    w = worker
    id = w.node_id(redis)
    assert_equal 0, health.first
    w.stop
    code, out, err, = health
    assert_one_line(code, out, err, 2, /no live node/)
    code, out, err, = health("--node", id)
    assert_one_line(code, out, err, 2, /node #{id} is not registered/)
  end

  # SIGSTOP: the node's key still lives (recovery_delay 20 s) but its
  # heartbeats stop; past two intervals and a second it is stale.
  def test_a_paused_worker_is_stale
    w = worker(env: {"SOLID_JOBS_TEST_RECOVERY_DELAY" => "20"})
    id = w.node_id(redis)
    assert_equal 0, health("--node", id).first
    w.pause
    fresh_for = SolidJobs::Health.fresh_for_ms(500) / 1000.0
    sleep fresh_for + 0.5
    assert_operator redis.pttl(key("node:#{id}")), :>, 0, "the node is still registered"
    code, out, err, = health("--node", id)
    assert_one_line(code, out, err, 2, /node #{id} is stale: last heartbeat [\d.]+s ago, stale after #{fresh_for}s/)
    code, out, err, = health
    assert_one_line(code, out, err, 2, /no fresh node: 1 stale/)
    code, out, err, = health("--local")
    assert_one_line(code, out, err, 2, /1 stale node\(s\) on /)
    code, out, err, = health("--local", "--liveness")
    assert_one_line(code, out, err, 2, /1 stale node\(s\) on /)
    w.resume
    eventually("fresh again after SIGCONT") { health("--node", id).first.zero? }
  end

  def test_redis_down_exits_1_naming_it_without_its_password
    server = (@servers << RedisServer.new(password: "s3cret-pw").start).last
    server_url = server.url
    worker(server_url)
    assert_equal 0, health(url: server_url).first
    server.stop
    code, out, err, seconds = health(url: server_url)
    assert_one_line(code, out, err, 1, /unhealthy: redis \(redis\) unreachable: ConnectionError: .*refused/i)
    refute_includes err, "s3cret-pw"
    assert_operator seconds, :<, SolidJobs::Health::DEFAULT_TIMEOUT + STARTUP_SLACK
  end

  # Connections are accepted and nothing ever answers: the probe must give
  # up within its --timeout (plus process start-up), never hang.
  def test_a_hung_redis_exits_1_within_the_timeout
    proxy = (@proxies << FaultProxy.new(REDIS.port).start).last
    worker(proxy.url)
    assert_equal 0, health(url: proxy.url).first
    proxy.blackhole = true
    _, _, _, startup = health("--help")
    code, out, err, seconds = health("--timeout", "2", url: proxy.url)
    assert_one_line(code, out, err, 1, /unhealthy: redis \(redis\) unreachable: /)
    assert_operator seconds, :>=, 1.0, "it waited for an answer (#{seconds}s)"
    assert_operator seconds, :<, startup + 2 + STARTUP_SLACK, "bounded by --timeout 2 (start-up alone #{startup.round(2)}s)"
    code, _, err, seconds = health(url: proxy.url)
    assert_equal 1, code, err
    assert_operator seconds, :<, startup + SolidJobs::Health::DEFAULT_TIMEOUT + STARTUP_SLACK, "the default 3 s bound"
    code, out, err, = health("--liveness", "--local", "--timeout", "1", url: proxy.url)
    assert_one_line(code, out, err, 0, /ok \(liveness; a restart would not help\): redis \(redis\) unreachable/)
  ensure
    proxy&.blackhole = false
  end

  # Engine-only: the engine's PING, then the nodes announced to it (NODES,
  # ages on the engine's clock): none yet is unhealthy, a live engine-only
  # worker is fresh, by id too; a stopped one is gone; a stopped engine is
  # a backend failure.
  def test_an_engine_only_configuration_checks_the_engine_and_its_nodes
    engine = (@servers << EngineServer.new.start).last
    env = {"SOLID_JOBS_TEST_ENGINE_URL" => engine.url}
    code, out, err, = health(env: env)
    assert_one_line(code, out, err, 2, /no live node/)
    w = WorkerProcess.new(redis_url: REDIS.url, namespace: @namespace, log: File.join(@ledger_dir, "engine-worker.log"),
                          env: env).start
    @workers << w
    client = SolidJobs::Native::EngineClient.new(engine.url, nil, {connect: 2.0, read: 2.0, write: 2.0})
    node_id = nil
    eventually("the engine-only worker announced itself") do
      node_id = client.call(["NODES"]).find { |_, _, _, d| JSON.parse(d)["pid"] == w.pid }&.first
    end
    code, out, err, = health(env: env)
    assert_one_line(code, out, err, 0, /ok: solid_engine \(solid_engine\) answered in [\d.]+ ms; 1 fresh node/)
    code, out, err, = health("--node", node_id, env: env)
    assert_one_line(code, out, err, 0, /node #{node_id} heartbeat [\d.]+ ?m?s ago/)
    code, _out, err, = health("--local", env: env)
    assert_equal 0, code, err
    w.stop
    code, out, err, = health("--node", node_id, env: env)
    assert_one_line(code, out, err, 2, /node #{node_id} is not registered/)
    engine.stop
    code, out, err, = health(env: env)
    assert_one_line(code, out, err, 1, /solid_engine \(solid_engine\) unreachable/)
  end

  def test_usage_errors_exit_with_ex_usage
    {
      %w[--timeout 0] => /invalid --timeout/,
      %w[--timeout soon] => /invalid argument: --timeout soon/,
      %w[--node a --local] => /use one/,
      %w[--bogus] => /invalid option: --bogus/,
      %w[extra] => /unexpected argument/
    }.each do |args, pattern|
      code, out, err, = health(*args)
      assert_equal 64, code, "#{args.join(" ")}: #{err}"
      assert_match pattern, err, args.join(" ")
      assert_empty out
    end
    code, out, = health("--help")
    assert_equal 0, code
    assert_match(/exit 1 a backend did not answer, 2 the nodes did not pass, 64 usage/, out)
  end
end
