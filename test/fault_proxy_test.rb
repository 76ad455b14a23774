# frozen_string_literal: true

require_relative "test_helper"
require_relative "support/fault_proxy"

# The fault proxy is the suite's tool for network faults; these tests pin
# down that each fault does what the fault tests rely on, against a real
# Redis.
class FaultProxyTest < SolidJobsTest
  def setup
    super
    @proxy = FaultProxy.new(REDIS.port).start
  end

  def teardown
    @proxy.close
    super
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
    eventually("the released request reaches the server") { direct.get(key) }
    assert_equal "late", direct.get(key), "released, the held request arrives"
  end

  def test_blackhole_silences_new_connections
    @proxy.blackhole = true
    assert_raises(Redis::TimeoutError, Redis::CannotConnectError) { client.ping }
    @proxy.blackhole = false
    assert_equal "PONG", client.ping
  end

  def test_an_upstream_that_refuses_for_a_while_does_not_end_the_proxy
    port = RedisServer.free_port
    proxy = FaultProxy.new(port).start
    down = Redis.new(url: proxy.url, timeout: 1, reconnect_attempts: 0)
    assert_raises(Redis::BaseConnectionError) { down.ping }
    server = RedisServer.new(port: port).start
    assert_equal "PONG", Redis.new(url: proxy.url, timeout: 1, reconnect_attempts: 0).ping
  ensure
    proxy&.close
    server&.cleanup
  end

  def test_cut_reply_closes_the_connection_mid_reply
    r = client
    r.ping
    @proxy.cut_replies(1)
    assert_raises(Redis::ConnectionError, Redis::TimeoutError) { r.get("x" * 10) }
    assert_equal 1, @proxy.cuts_done
    assert_equal "PONG", client.ping
  end

  def test_disconnected_held_client_sees_the_end_while_its_request_still_arrives_late
    key = "fault-proxy:#{SecureRandom.hex(4)}"
    r = client
    r.ping
    @proxy.hold_existing!
    writer = Thread.new do
      r.set(key, "late")
    rescue Redis::BaseConnectionError => e
      e
    end
    eventually("the request is held in flight") { @proxy.held_request?(/#{key}/) }
    assert @proxy.held_request?(/#{key}/), "the request is held in flight"
    refute @proxy.held_request?(/no-such-request/)
    @proxy.disconnect_held_clients!
    assert_kind_of Redis::BaseConnectionError, writer.value, "the client sees its connection end at once"
    direct = Redis.new(url: REDIS.url)
    assert_nil direct.get(key)
    @proxy.release_held!
    eventually("the request of the given-up connection reaches the server") { direct.get(key) }
    assert_equal "late", direct.get(key), "released, the request of the given-up connection arrives"
  end

  def test_cut_replies_to_matching_requests_only
    r = client
    r.ping
    @proxy.cut_replies(1, request: /cut-me/)
    assert_equal "PONG", r.ping, "a reply to another request passes"
    assert_raises(Redis::ConnectionError, Redis::TimeoutError) { client.get("cut-me") }
    assert_equal 1, @proxy.cuts_done
    assert_nil client.get("cut-me"), "one cut only"
  end
end
