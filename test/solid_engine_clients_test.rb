# frozen_string_literal: true

require_relative "test_helper"
require "open3"
require "socket"

# Clients nobody here wrote, with their default settings, against a real
# solid-engine-server over TCP (issue 18, item 8): redis-py from PyPI (the
# newest, in a venv this test creates; 8.x sends `HELLO 3`, with
# `AUTH default <password>` when it has one) and redis-rb (Debian's
# ruby-redis, the one in the bundle). Each runs the job commands: PUSH,
# FETCH, ACK, GET, STATS.
class SolidEngineClientsTest < Minitest::Test
  PASSWORD = "client-test-secret"

  # redis-py drives the server the way a Python producer/worker would; it
  # prints one JSON line of what it saw.
  PYTHON = <<~PY
    import json, sys, uuid
    import redis
    port, password = int(sys.argv[1]), (sys.argv[2] or None)
    r = redis.Redis(host="127.0.0.1", port=port, password=password)
    jid = str(uuid.uuid4())
    out = {"version": redis.__version__}
    out["ping"] = r.ping()
    out["push"] = r.execute_command("PUSH", 7, jid, b"from-python")
    got = r.execute_command("FETCH", 1, 30000, 0, 7)
    job_id, channel, fence, attempts, payload = got[0]
    out["fetched"] = [job_id.decode(), channel, attempts, payload.decode()]
    ack = r.execute_command("ACK", jid, fence)
    out["ack"] = ack.decode() if isinstance(ack, bytes) else ack
    state = r.execute_command("GET", jid)
    out["state"] = state[2].decode()
    out["unknown"] = r.execute_command("GET", str(uuid.uuid4()))
    out["stats"] = "pushed_total:1" in r.execute_command("STATS").decode()
    out["protocol"] = r.connection_pool.get_connection().protocol
    print(json.dumps(out))
  PY

  def setup
    super
    @server = nil
  end

  def teardown
    @server&.cleanup
    super
  end

  def test_redis_py_with_its_defaults_connects_and_runs_the_job_commands
    python = venv_python
    [nil, PASSWORD].each do |password|
      port = start_server(password: password)
      out, err, status = Open3.capture3(python, "-c", PYTHON, port.to_s, password.to_s)
      assert status.success?, "redis-py (password: #{!password.nil?}) failed:\n#{err}\n#{@server.log_tail}"
      seen = JSON.parse(out.lines.last)
      assert_match(/\A\d+\./, seen["version"])
      assert_equal 3, seen["protocol"], "redis-py's default is RESP3 (HELLO 3)"
      assert_equal [true, 1, "OK", "completed", nil, true], seen.values_at("ping", "push", "ack", "state", "unknown", "stats")
      assert_equal [7, 1, "from-python"], seen["fetched"].drop(1)
      @server.cleanup
      @server = nil
    end
  end

  def test_redis_rb_with_its_defaults_connects_and_runs_the_job_commands
    [nil, PASSWORD].each do |password|
      port = start_server(password: password)
      redis = Redis.new(host: "127.0.0.1", port: port, password: password)
      id = SecureRandom.uuid
      assert_equal "PONG", redis.ping
      assert_equal 1, redis.call("PUSH", "7", id, "from-ruby")
      job_id, channel, fence, attempts, payload = redis.call("FETCH", "1", "30000", "0", "7").first
      assert_equal [id, 7, 1, "from-ruby"], [job_id, channel, attempts, payload]
      assert_equal "OK", redis.call("ACK", id, fence.to_s)
      assert_equal "completed", redis.call("GET", id)[2]
      assert_nil redis.call("GET", SecureRandom.uuid)
      assert_match(/^pushed_total:1\r$/, redis.call("STATS"))
      redis.close
      if password
        wrong = Redis.new(host: "127.0.0.1", port: port, password: "not-it", reconnect_attempts: 0)
        assert_raises(Redis::CommandError) { wrong.ping }
      end
      @server.cleanup
      @server = nil
    end
  end

  private

  def start_server(password:)
    port = free_port
    @server = EngineServer.new(password: password, extra: ["--listen", "tcp://127.0.0.1:#{port}"]).start
    port
  end

  def free_port
    server = TCPServer.new("127.0.0.1", 0)
    server.addr[1]
  ensure
    server&.close
  end

  # A venv of this run, with the newest redis-py from PyPI. Without network
  # (pip fails) the test is skipped, saying so.
  def venv_python
    @venv_dir = Dir.mktmpdir("solid-engine-redis-py")
    _, err, status = Open3.capture3("python3", "-m", "venv", @venv_dir)
    skip "python3 -m venv failed: #{err}" unless status.success?
    pip = File.join(@venv_dir, "bin", "pip")
    out, status = Open3.capture2e(pip, "install", "--quiet", "--disable-pip-version-check", "redis")
    skip "pip install redis failed (no network?):\n#{out.lines.last(5).join}" unless status.success?
    File.join(@venv_dir, "bin", "python")
  end

  def after_teardown
    FileUtils.rm_rf(@venv_dir) if @venv_dir
    super
  end
end
