# frozen_string_literal: true

require_relative "test_helper"
require_relative "support/warm_tasks"
require "active_support/notifications"
require "socket"

# The warm pool: the routing rule, the executor's round trip, and real warm
# worker processes (`bundle exec solid-jobs warm ID`, as users start them:
# issue 11, failure 4) serving a temporary app.
class WarmPoolTest < SolidJobsTest
  WarmPool = SolidJobs::WarmPool

  class FakeConnectionPool; end

  def setup
    super
    @socket_dir = Dir.mktmpdir("sjw") # short: Unix socket paths are limited to about 100 bytes
    @app_root = Dir.mktmpdir("solid-jobs-warm-app")
    FileUtils.mkdir_p(File.join(@app_root, "config"))
    File.write(File.join(@app_root, "config", "environment.rb"),
               "require #{File.join(ROOT, "test", "support", "warm_tasks.rb").inspect}\n")
    @env_before = ENV.to_h.slice("SOLID_JOBS_WARM_SOCKET_DIR", "SOLID_JOBS_WARM_WORKERS", "SOLID_JOBS_WARM_TIMEOUT")
    ENV["SOLID_JOBS_WARM_SOCKET_DIR"] = @socket_dir
    ENV["SOLID_JOBS_WARM_WORKERS"] = "1"
    WarmPool.stats_keeper.reset
    @warm_workers = []
  end

  def teardown
    @warm_workers.each do |pid|
      Process.kill("KILL", pid)
      Process.wait(pid)
    rescue Errno::ESRCH, Errno::ECHILD
      nil
    end
    WarmPool.assume_rails = nil
    %w[SOLID_JOBS_WARM_SOCKET_DIR SOLID_JOBS_WARM_WORKERS SOLID_JOBS_WARM_TIMEOUT].each { |k| ENV[k] = @env_before[k] }
    FileUtils.rm_rf([@socket_dir, @app_root])
    super
  end

  def warm_log = File.join(@ledger_dir, "warm.log")

  def start_warm_worker(id = 0)
    env = {"SOLID_JOBS_WARM_SOCKET_DIR" => @socket_dir, "SOLID_JOBS_LOG_LEVEL" => "info"}
    pid = SolidJobsCommand.spawn(env, "warm", id.to_s, chdir: @app_root, out: [warm_log, "a"], err: [warm_log, "a"])
    @warm_workers << pid
    eventually("warm worker #{id} listening") { File.exist?(warm_log) && File.read(warm_log).include?("warm worker #{id} ready") }
    pid
  end

  def raw_request(line)
    UNIXSocket.open(WarmPool.socket_path(0)) do |socket|
      socket.write(line)
      socket.close_write
      JSON.parse(socket.gets)
    end
  end

  def klass_holding(value)
    Class.new { include SolidJobs::Task }.tap { |k| k.instance_variable_set(:@state, value) }
  end

  # -- the rule ------------------------------------------------------------

  def test_the_rule_needs_rails_an_unshareable_argument_and_thread_state
    unshareable = [+"a string", 1]
    assert WarmPool.requires_warm_pool?(klass_holding(Mutex.new), unshareable, rails: true)
    refute WarmPool.requires_warm_pool?(klass_holding(Mutex.new), unshareable, rails: false), "no Rails"
    refute WarmPool.requires_warm_pool?(klass_holding(Mutex.new), ["frozen", 1, nil], rails: true), "all shareable"
    refute WarmPool.requires_warm_pool?(klass_holding(Mutex.new), [], rails: true), "no arguments"
    refute WarmPool.requires_warm_pool?(klass_holding({"plain" => "hash"}), unshareable, rails: true), "no thread state"
    assert WarmPool.requires_warm_pool?(klass_holding(Thread.current), unshareable, rails: true)
    assert WarmPool.requires_warm_pool?(klass_holding(Fiber.new {}), unshareable, rails: true)
    assert WarmPool.requires_warm_pool?(klass_holding(FakeConnectionPool.new), unshareable, rails: true), "a class name with Pool"
    assert WarmPool.requires_warm_pool?(Class.new(klass_holding(Mutex.new)), unshareable, rails: true), "inherited"
    assert WarmLedgerTask.requires_warm_pool?(unshareable, rails: true)
    refute LedgerTask.requires_warm_pool?(unshareable, rails: true)
  end

  def test_the_rails_condition_is_injectable
    refute defined?(::Rails), "this suite runs without Rails"
    refute WarmLedgerTask.requires_warm_pool?([+"x"])
    WarmPool.assume_rails = true
    assert WarmLedgerTask.requires_warm_pool?([+"x"])
  end

  def test_enqueue_routes_to_the_generic_executor_with_plain_frozen_json
    path = ledger_path
    WarmPool.assume_rails = true
    id = WarmLedgerTask.enqueue(path, "routed", 0)
    plain_id = LedgerTask.enqueue(path, "plain")
    envelopes = redis.lrange(key("channel:warm"), 0, -1).map { |raw| JSON.parse(raw) }
    assert_equal 1, envelopes.size
    envelope = envelopes.first
    assert_equal [id, "SolidJobsGenericExecutor", "warm", 3], envelope.values_at("id", "task", "channel", "max_failures")
    assert_equal ["WarmLedgerTask", [path, "routed", 0]], envelope["arguments"]
    assert_equal "LedgerTask", JSON.parse(redis.lindex(key("channel:default"), 0))["task"], plain_id
    copy = WarmPool.plain_json(WarmLedgerTask, [+"a", {"k" => [1]}])
    assert Ractor.shareable?(copy), "deep-copied and frozen"
    error = assert_raises(ArgumentError) { WarmLedgerTask.enqueue(path, :symbol) }
    assert_match(/arguments\[1\]/, error.message)
    assert_equal 1, redis.llen(key("channel:warm")), "nothing written for the refused job"
    ids = WarmLedgerTask.enqueue_many([[path.dup.freeze, "frozen"], [path.dup, +"mutable"]])
    assert_equal 2, ids.compact.size
    tasks = redis.lrange(key("channel:warm"), 0, -1).map { |raw| JSON.parse(raw)["task"] }
    assert_equal %w[SolidJobsGenericExecutor SolidJobsGenericExecutor WarmLedgerTask].sort, tasks.sort,
                 "shareable arguments keep the Ractor path"
  end

  # -- a real warm worker --------------------------------------------------

  def test_a_round_trip_returns_the_result_and_is_instrumented
    path = ledger_path
    pid = start_warm_worker
    events = []
    subscriber = ActiveSupport::Notifications.subscribe("warm_pool.roundtrip.solid_jobs") { |*, payload| events << payload }
    result = SolidJobsGenericExecutor.new.execute_task("WarmLedgerTask", [path, "first"])
    assert_equal({"label" => "first", "pid" => pid}, result)
    assert_equal 5, SolidJobsGenericExecutor.new.execute_task("WarmPerformOnly", [2, 3]), "perform when there is no execute_task"
    assert_equal ["first #{pid}"], ledger_lines
    assert_equal %w[ok ok], events.map { |e| e[:outcome] }
    assert events.all? { |e| e[:seconds].positive? && e[:target_class] && e[:worker]&.zero? }
    stats = WarmPool.stats
    assert_equal [2, 2, 0], stats.values_at("roundtrips", "ok", "exhausted")
    assert stats["p50_ms"]
  ensure
    ActiveSupport::Notifications.unsubscribe(subscriber) if subscriber
  end

  def test_a_remote_error_is_raised_and_the_worker_goes_on
    path = ledger_path
    start_warm_worker
    error = assert_raises(SolidJobsGenericExecutor::RemoteError) { WarmPool.call("WarmFailingTask", [path, "x"]) }
    assert_equal "KeyError", error.remote_class
    assert_match(/KeyError: key not found: "missing"/, error.message)
    error = assert_raises(SolidJobsGenericExecutor::RemoteError) { WarmPool.call("NoSuchTask", []) }
    assert_equal "NameError", error.remote_class
    assert_equal({"label" => "after", "pid" => @warm_workers.last}, WarmPool.call("WarmLedgerTask", [path, "after"]))
    assert_equal 2, WarmPool.stats["remote_errors"]
  end

  def test_a_malformed_request_gets_an_error_reply_and_the_worker_survives
    start_warm_worker
    reply = raw_request("this is not JSON\n")
    assert_equal %w[error JSON::ParserError], reply.values_at("status", "error_class")
    reply = raw_request(%({"target_class": 42}\n))
    assert_equal %w[error ArgumentError], reply.values_at("status", "error_class")
    reply = raw_request(%({"target_class": "WarmPerformOnly", "arguments": [1, 2]}\n))
    assert_equal({"status" => "ok", "result" => 3}, reply)
  end

  def test_the_socket_is_private_and_removed_on_term
    pid = start_warm_worker(0)
    path = WarmPool.socket_path(0)
    assert File.socket?(path)
    assert_equal 0o600, File.stat(path).mode & 0o777
    Process.kill("TERM", pid)
    _, status = Process.wait2(pid)
    @warm_workers.delete(pid)
    assert_equal 0, status.exitstatus, File.read(warm_log)
    refute File.exist?(path), "socket removed"
  end

  def test_a_stale_socket_is_replaced_and_a_live_one_is_not_taken_over
    UNIXServer.new(WarmPool.socket_path(0)).close # left by a killed worker
    first = start_warm_worker(0)
    second_log = File.join(@ledger_dir, "second.log")
    second = SolidJobsCommand.spawn({"SOLID_JOBS_WARM_SOCKET_DIR" => @socket_dir}, "warm", "0",
                                    chdir: @app_root, out: second_log, err: second_log)
    _, status = Process.wait2(second)
    refute status.success?
    assert_match(/already running/, File.read(second_log))
    assert_equal 3, WarmPool.call("WarmPerformOnly", [1, 2]), "the first worker still serves"
    assert_equal first, @warm_workers.first
  end

  def test_a_timeout_is_counted_and_the_worker_survives_its_late_reply
    path = ledger_path
    start_warm_worker
    assert_raises(SolidJobsGenericExecutor::Timeout) { WarmPool.call("WarmLedgerTask", [path, "slow", 1.0], timeout: 0.2) }
    stats = WarmPool.stats
    assert_equal [1, 1], stats.values_at("timeouts", "exhausted")
    assert_equal "1", redis.get(key("metric:warm_pool:timeouts"))
    assert_equal({"label" => "next", "pid" => @warm_workers.last}, WarmPool.call("WarmLedgerTask", [path, "next"]))
    assert_equal ["slow", "next"], ledger_lines.map { |l| l.split.first }
  end

  def test_a_refused_connection_is_counted
    error = assert_raises(SolidJobsGenericExecutor::Refused) { WarmPool.call("WarmLedgerTask", ["/dev/null", "x"]) }
    assert_match(/is `solid-jobs warm 0` running\?/, error.message)
    UNIXServer.new(WarmPool.socket_path(0)).close # a socket file nobody listens on
    assert_raises(SolidJobsGenericExecutor::Refused) { WarmPool.call("WarmLedgerTask", ["/dev/null", "x"]) }
    assert_equal [2, 2], WarmPool.stats.values_at("refused", "exhausted")
    assert_equal "2", redis.get(key("metric:warm_pool:refused"))
  end

  def test_tasks_are_spread_over_workers_by_crc32_of_the_task_name
    ENV["SOLID_JOBS_WARM_WORKERS"] = "3"
    assert_equal Zlib.crc32("WarmLedgerTask") % 3, WarmPool.worker_for("WarmLedgerTask")
    start_warm_worker(WarmPool.worker_for("WarmPerformOnly"))
    assert_equal 7, WarmPool.call("WarmPerformOnly", [3, 4])
  end

  # -- end to end ----------------------------------------------------------

  def test_a_worker_process_sends_routed_jobs_to_the_warm_worker
    path = ledger_path
    warm_pid = start_warm_worker
    WarmPool.assume_rails = true
    WarmLedgerTask.enqueue(path, "e2e")
    failing_id = WarmFailingTask.enqueue(path, "fails")
    log = File.join(@ledger_dir, "worker.log")
    worker = WorkerProcess.new(redis_url: REDIS.url, namespace: @namespace, log: log,
                               args: %w[--channel warm --concurrency 1 --thread-concurrency 1],
                               env: {"SOLID_JOBS_WARM_SOCKET_DIR" => @socket_dir}).start
    eventually("the routed job ran in the warm worker") { ledger_lines.include?("e2e #{warm_pid}") }
    eventually("the failure was recorded") { redis.hexists(key("attempts"), failing_id) }
    worker.signal("TERM")
    assert_equal 0, worker.wait.exitstatus, File.read(log)
    attempt = JSON.parse(redis.hget(key("attempts"), failing_id))
    assert_equal "SolidJobs::WarmPool::RemoteError", attempt["error_class"]
    assert_match(/KeyError/, attempt["message"])
    assert_equal 1, redis.zcard(key("retrying")), "the failure policy retries it like any task"
  end
end
