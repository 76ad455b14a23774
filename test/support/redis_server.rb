# frozen_string_literal: true

require "socket"
require_relative "server_process"
require "tmpdir"
require "fileutils"

# A private redis-server on a free port. Nothing in the suite assumes a
# running Redis; the process is killed when the suite ends.
class RedisServer
  include ServerProcess

  attr_reader :port, :dir

  def self.free_port
    server = TCPServer.new("127.0.0.1", 0)
    server.addr[1]
  ensure
    server&.close
  end

  # password: the server requires it (requirepass), and url carries it.
  def initialize(port: self.class.free_port, appendonly: false, dir: nil, password: nil)
    @port = port
    @appendonly = appendonly
    @dir = dir || Dir.mktmpdir("solid-jobs-redis")
    @password = password
  end

  def url(db = 0) = "redis://#{":#{@password}@" if @password}127.0.0.1:#{port}/#{db}"

  def start
    args = ["redis-server", "--port", port.to_s, "--bind", "127.0.0.1", "--save", "", "--dir", dir,
            "--appendonly", @appendonly ? "yes" : "no", "--appendfsync", "always"]
    args += ["--requirepass", @password] if @password
    @pid = Process.spawn(*args, out: File::NULL, err: File::NULL)
    wait_until_ready
    self
  end


  def cleanup
    stop
    FileUtils.rm_rf(dir)
  end

  private

  # Ready means PING answers PONG: a Redis replaying its AOF accepts
  # connections but answers LOADING until it is done.
  def wait_until_ready
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 20
    until ping == "+PONG"
      raise "redis-server did not become ready on port #{port}" if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline

      sleep 0.02
    end
  end

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
