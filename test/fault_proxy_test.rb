# frozen_string_literal: true

require_relative "test_helper"
require_relative "support/fault_proxy"

# The fault proxy is the suite's tool for network faults; these tests pin
# down that each fault does what the fault tests rely on, against a real
# Redis.
class FaultProxyTest < Minitest::Test
  def setup
    @proxy = FaultProxy.new(REDIS.port).start
  end

  def teardown
    @proxy.close
  end

  def client = Redis.new(url: @proxy.url, timeout: 1, reconnect_attempts: 0)

  def test_passes_traffic_and_adds_latency
    r = client
    assert_equal "PONG", r.ping
    @proxy.delay = 0.05
    started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    r.ping
    # Two chunks (request and reply), each delayed.
    assert_operator Process.clock_gettime(Process::CLOCK_MONOTONIC) - started, :>=, 0.1
  end

  def test_held_connection_delivers_its_request_late
    key = "fault-proxy:#{SecureRandom.hex(4)}"
    r = client
    r.ping
    @proxy.hold_existing!
    assert_raises(Redis::TimeoutError) { r.set(key, "late") }
    direct = Redis.new(url: REDIS.url)
    assert_nil direct.get(key), "a held request must not reach the server"
    assert_equal "PONG", client.ping, "new connections pass while old ones are held"
    @proxy.release_held!
    sleep 0.1
    assert_equal "late", direct.get(key), "released, the held request arrives"
  end

  def test_blackhole_silences_new_connections
    @proxy.blackhole = true
    assert_raises(Redis::TimeoutError, Redis::CannotConnectError) { client.ping }
    @proxy.blackhole = false
    assert_equal "PONG", client.ping
  end

  def test_cut_reply_closes_the_connection_mid_reply
    r = client
    r.ping
    @proxy.cut_replies(1)
    assert_raises(Redis::ConnectionError, Redis::TimeoutError) { r.get("x" * 10) }
    assert_equal 1, @proxy.cuts_done
    assert_equal "PONG", client.ping
  end
end
