# frozen_string_literal: true

require "socket"
require "tmpdir"
require "fileutils"
require_relative "child_process"

# A private redis-server on a free port, no RDB snapshots, so nothing is
# written to disk unless a test asks for the AOF (fsync always). Nothing in
# the suite or the benchmarks assumes a running Redis.
class RedisServer < ChildProcess
  READY_TIMEOUT = 20

  attr_reader :port, :dir

  # The kernel hands out a port nobody is bound to; the small race until
  # redis-server binds it is accepted.
  def self.free_port
    server = TCPServer.new("127.0.0.1", 0)
    server.addr[1]
  ensure
    server&.close
  end

  # password: the server requires it (requirepass), and url carries it.
  def initialize(port: self.class.free_port, appendonly: false, dir: nil, password: nil, children: nil)
    @port = port
    @dir = dir || Dir.mktmpdir("solid-jobs-redis")
    @password = password
    args = ["redis-server", "--port", port.to_s, "--bind", "127.0.0.1", "--save", "", "--dir", @dir,
            "--appendonly", appendonly ? "yes" : "no", "--appendfsync", "always"]
    args += ["--requirepass", password] if password
    super(args, log: File.join(@dir, "redis.log"), children: children)
  end

  def url(db = 0) = "redis://#{":#{@password}@" if @password}127.0.0.1:#{port}/#{db}"

  # Ready means PING answers PONG: a Redis replaying its AOF accepts
  # connections but answers LOADING until it is done.
  def start
    super
    wait_until_ready(READY_TIMEOUT) { ping == "+PONG" }
    self
  end

  def cleanup
    stop
    FileUtils.rm_rf(dir)
  end

  private

  def ping
    socket = TCPSocket.new("127.0.0.1", port)
    if @password
      socket.write("AUTH #{@password}\r\n")
      return nil unless socket.gets&.chomp == "+OK"
    end
    socket.write("PING\r\n")
    socket.gets&.chomp
  rescue SystemCallError, IOError
    nil
  ensure
    socket&.close
  end
end
