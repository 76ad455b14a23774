# frozen_string_literal: true

require_relative "test_helper"

# The suite's own Redis helper: a free port is only free when asked, and a
# test handed a port another test's Redis took must get its own server, not
# share that one until it is stopped under it.
class RedisServerTest < Minitest::Test
  def test_a_start_handed_a_taken_port_moves_to_a_free_one
    taken = REDIS.port
    ports = [taken]
    chooser = ->(*) { ports.shift || TCPServer.open("127.0.0.1", 0).then { |s| s.addr[1].tap { s.close } } }
    server = RedisServer.stub(:free_port, chooser) { RedisServer.new.start }
    refute_equal taken, server.port
    assert_equal server.pid, Redis.new(url: server.url).info("server")["process_id"].to_i, "its own child answers"
    assert_equal "PONG", Redis.new(url: REDIS.url).ping, "the other server is untouched"
  ensure
    server&.cleanup
  end

  def test_a_port_read_before_the_start_stays_put
    server = RedisServer.new
    port = server.port
    server.start
    assert_equal port, server.port
  ensure
    server&.cleanup
  end

  def test_a_closed_port_refuses_and_stays_closed
    port = RedisServer.closed_port
    assert_raises(Errno::ECONNREFUSED) { TCPSocket.new("127.0.0.1", port) }
    assert_raises(Errno::EADDRINUSE) { TCPServer.new("127.0.0.1", port) }
  end
end
