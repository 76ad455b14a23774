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

  attr_reader :dir

  # A free port is only free when asked: a test starting a server beside
  # this one can be handed the same port. `start` checks that the server
  # answering is its own child and, on a port it chose, retries elsewhere.
  START_ATTEMPTS = 5

  def self.free_port
    server = TCPServer.new("127.0.0.1", 0)
    server.addr[1]
  ensure
    server&.close
  end

  # A port where a connection is refused for the rest of this process: a
  # socket bound to it and never listening holds it (no SO_REUSEADDR, so no
  # server can take it meanwhile, as it could a port merely closed).
  def self.closed_port
    socket = Socket.new(:INET, :STREAM)
    socket.bind(Addrinfo.tcp("127.0.0.1", 0))
    (@held ||= []) << socket
    socket.local_address.ip_port
  end

  # password: the server requires it (requirepass), and url carries it.
  def initialize(port: nil, appendonly: false, dir: nil, password: nil, children: nil)
    @port_chosen = port.nil?
    @port = port || self.class.free_port
    @dir = dir || Dir.mktmpdir("solid-jobs-redis")
    @password = password
    @appendonly = appendonly
    super(arguments, log: File.join(@dir, "redis.log"), children: children)
  end

  # Read before the first start (a test pointing a worker at a Redis that
  # is not up yet), the port is fixed: a start can no longer move it.
  def port
    @port_chosen = false unless @started
    @port
  end

  def url(db = 0) = "redis://#{":#{@password}@" if @password}127.0.0.1:#{port}/#{db}"

  # Ready means PING answers PONG: a Redis replaying its AOF accepts
  # connections but answers LOADING until it is done.
  # Ready also means the server answering is this child: until a child
  # that lost the race for its port has exited, another test's Redis
  # answers there. A restart keeps its port (clients hold the URL).
  def start
    attempts = @port_chosen && !@started ? START_ATTEMPTS : 1
    begin
      super
      wait_until_ready(READY_TIMEOUT) { ping == "+PONG" && answering_pid == pid }
    rescue ProcessError
      attempts -= 1
      raise if attempts.zero? || !exited?

      @port = self.class.free_port
      @command = arguments
      retry
    end
    @started = true
    self
  end

  def cleanup
    stop
    FileUtils.rm_rf(dir)
  end

  private

  def arguments
    args = ["redis-server", "--port", @port.to_s, "--bind", "127.0.0.1", "--save", "", "--dir", @dir,
            "--appendonly", @appendonly ? "yes" : "no", "--appendfsync", "always"]
    @password ? args + ["--requirepass", @password] : args
  end

  def ping = session { |socket| command(socket, "PING") }

  # process_id from INFO server, of whichever Redis answers on the port.
  def answering_pid
    info = session do |socket|
      header = command(socket, "INFO server")
      socket.read(header[1..].to_i + 2) if header&.start_with?("$")
    end
    info && info[/^process_id:(\d+)/, 1]&.to_i
  end

  # One connection, authenticated when the server has a password; nil when
  # nothing (or nothing ready) answers.
  def session
    socket = TCPSocket.new("127.0.0.1", @port)
    return nil if @password && command(socket, "AUTH #{@password}") != "+OK"

    yield socket
  rescue SystemCallError, IOError
    nil
  ensure
    socket&.close
  end

  def command(socket, line)
    socket.write("#{line}\r\n")
    socket.gets&.chomp
  end
end
