# frozen_string_literal: true

require_relative "test_helper"
require "pp" # rubocop:disable Lint/RedundantRequireStatement -- PP (the constant) is not autoloaded, only Kernel#pp

# Credentials never leave the process in clear: not in a worker's log
# (Ruby's lines and Rust's), not in an exception message (Redis's, the
# engine's, a configuration error's), not in `inspect` or `pp` of the
# configuration and the backends, not in the NoMethodError of a mistyped
# setting. One rule (SolidJobs::Native.redact) masks them everywhere.
class SecretsTest < SolidJobsTest
  SECRET = "hunter2-#{SecureRandom.hex(4)}".freeze

  def read_log(path) = File.exist?(path) ? File.read(path) : ""

  def test_a_worker_waiting_for_redis_never_logs_the_password
    server = RedisServer.new(password: SECRET) # not started: the worker waits for it
    log = ledger_path("worker.log")
    worker = WorkerProcess.new(redis_url: server.url, namespace: @namespace, log: log).start
    eventually("the worker waits for Redis") { read_log(log).include?("waiting for") }
    server.start
    eventually("the worker started") { read_log(log).include?(" started: ") }
    worker.signal("TERM")
    assert worker.wait(timeout: 30).success?, read_log(log)

    text = read_log(log)
    refute_includes text, SECRET
    waiting = text.lines.grep(/waiting for/).first
    assert_includes waiting, "waiting for Redis (Redis connection failed: "
    assert_includes waiting, "(redis://:***@127.0.0.1:#{server.port}/0)", "the server is named, its password masked"
  ensure
    worker&.kill!
    server&.cleanup
  end

  def test_a_worker_waiting_for_solid_engine_names_the_engine_and_never_its_password
    engine = EngineServer.new(password: SECRET) # not started yet
    log = ledger_path("worker.log")
    env = {"SOLID_JOBS_TEST_ENGINE_URL" => engine.url, "SOLID_JOBS_TEST_ENGINE_PASSWORD" => SECRET}
    worker = WorkerProcess.new(redis_url: REDIS.url, namespace: @namespace, log: log, env: env).start
    eventually("the worker waits for the engine") { read_log(log).include?("waiting for") }
    engine.start
    eventually("the worker started") { read_log(log).include?(" started: ") }
    worker.signal("TERM")
    assert worker.wait(timeout: 30).success?, read_log(log)

    text = read_log(log)
    refute_includes text, SECRET
    waiting = text.lines.grep(/waiting for/).first
    assert_includes waiting, "waiting for SolidEngine (SolidEngine connection failed: "
    assert_includes waiting, "(#{engine.url})", "the URL as configured, not the redis+unix:// form used inside"
    refute_match(/redis/i, waiting)
  ensure
    worker&.kill!
    engine&.cleanup
  end

  def test_connection_errors_name_the_server_without_its_password
    closed = RedisServer.closed_port
    configure_solid_jobs(redis_url: "redis://:#{SECRET}@127.0.0.1:#{closed}/0",
                         backends: {engine: {adapter: :solid_engine, url: "tcp://127.0.0.1:#{closed}", password: SECRET}},
                         channel_backends: {"engine-jobs" => :engine})
    error = assert_raises(SolidJobs::ConnectionError) { LedgerTask.enqueue("/dev/null", "x") }
    assert_match(%r{\ARedis connection failed: .*\(redis://:\*\*\*@127\.0\.0\.1:#{closed}/0\)\z}, error.message)

    engine = SolidJobs.routing.backend_for("engine-jobs")
    error = assert_raises(SolidJobs::ConnectionError) do
      engine.enqueue("LedgerTask", [["/dev/null", "x"]], channel: "engine-jobs", max_failures: 3)
    end
    assert_match(%r{\ASolidEngine connection failed: .*\(tcp://127\.0\.0\.1:#{closed}\)\z}, error.message)
    refute_includes error.message, SECRET

    wrong = RedisServer.new(password: SECRET).start
    configure_solid_jobs(redis_url: "redis://:not-#{SECRET}@127.0.0.1:#{wrong.port}/0")
    error = assert_raises(SolidJobs::Error) { LedgerTask.enqueue("/dev/null", "x") }
    refute_includes error.message, SECRET
  ensure
    wrong&.cleanup
  end

  def test_configuration_and_backends_inspect_short_and_redacted
    configure_solid_jobs(redis_url: "redis://:#{SECRET}@127.0.0.1:#{REDIS.port}/0",
                         backends: {engine: {adapter: :solid_engine, url: "tcp://user:#{SECRET}@127.0.0.1:1", password: SECRET}},
                         channel_backends: {"engine-jobs" => :engine})
    texts = [SolidJobs.config.inspect, SolidJobs.routing.inspect, SolidJobs.routing.backend_for("engine-jobs").inspect,
             SolidJobs.routing.redis.inspect, PP.pp(SolidJobs.config, +""), PP.pp(SolidJobs.routing, +"")]
    texts.each { |text| refute_includes text, SECRET }
    assert_includes SolidJobs.config.inspect, "redis://:***@127.0.0.1:#{REDIS.port}/0"
    assert_includes SolidJobs.routing.backend_for("engine-jobs").inspect, "tcp://user:***@127.0.0.1:1"

    error = assert_raises(NoMethodError) { SolidJobs.configure { |c| c.concurency = 3 } }
    refute_includes error.message, SECRET
    assert_operator error.message.lines.first.size, :<, 200, "the receiver is named, not dumped"
    # Ruby 3.2+ put did_you_mean's suggestions in detailed_message.
    suggested = error.respond_to?(:detailed_message) ? error.detailed_message(highlight: false) : error.message
    refute_includes suggested, SECRET
    assert_match(/concurrency=/, suggested, "did_you_mean still suggests the setting")
  end

  def test_configuration_errors_and_log_lines_mask_credentials
    error = assert_raises(SolidJobs::ConfigurationError) do
      SolidJobs.configure { |c| c.redis_url = "redis://:#{SECRET}@127.0.0.1:notaport/0" }
    end
    assert_match(%r{invalid redis_url "redis://:\*\*\*@127\.0\.0\.1:notaport/0"}, error.message)
    error = assert_raises(SolidJobs::ConfigurationError) do
      SolidJobs.configure do |c|
        c.backends = {engine: {adapter: :solid_engine, url: "tcp://127.0.0.1:1", password: SECRET, leas: 1}}
      end
    end
    refute_includes error.message, SECRET
    error = SolidJobs::Error.new("redis://:#{SECRET}@h?password=#{SECRET}")
    assert_equal "SolidJobs::Error: redis://:***@h?password=***", "#{error.class}: #{error.message}"

    %i[text json].each do |format|
      stderr = capture_log(format) do
        SolidJobs::Log.warn("cannot reach redis://:#{SECRET}@cache:6379 with {:password=>\"#{SECRET}\"}",
                            url: "redis://u:#{SECRET}@h")
      end
      refute_includes stderr, SECRET
      masked = 'cannot reach redis://:***@cache:6379 with {:password=>"***"}'
      assert_includes stderr, format == :json ? masked.to_json : " #{masked} "
      assert_includes stderr, "redis://u:***@h"
    end
  end

  private

  # What the log writes to file descriptor 2 (the native formatter writes
  # there directly, not through $stderr).
  def capture_log(format, &)
    level = SolidJobs::Log.level
    previous = SolidJobs::Log.format
    SolidJobs::Log.level = :warn
    SolidJobs::Log.format = format
    _, err = capture_subprocess_io(&)
    err
  ensure
    SolidJobs::Log.level = level
    SolidJobs::Log.format = previous
  end
end
