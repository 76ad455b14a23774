# frozen_string_literal: true

require "socket"
require "tmpdir"
require "fileutils"

module Bench
  # A throwaway redis-server on a free port, with persistence off so neither
  # RDB snapshots nor AOF writes land inside the measurements.
  class RedisServer
    READY_TIMEOUT = 10

    attr_reader :port

    def initialize(children)
      @children = children
      @port = free_port
      @dir = Dir.mktmpdir("solid-jobs-bench-redis")
    end

    def url = "redis://127.0.0.1:#{port}/0"

    def start
      @pid = @children.spawn(
        "redis-server", "--port", port.to_s, "--bind", "127.0.0.1", "--dir", @dir,
        "--save", "", "--appendonly", "no",
        out: File.join(@dir, "redis.log"), err: [:child, :out]
      )
      wait_until_accepting
      self
    end

    # Safe to call more than once and after a failed start.
    def stop
      if @pid
        Process.kill("KILL", @pid)
        Process.wait(@pid)
      end
    rescue Errno::ESRCH, Errno::ECHILD
      nil
    ensure
      @pid = nil
      FileUtils.rm_rf(@dir)
    end

    private

    # The kernel hands out a port nobody is bound to; the small race until
    # redis-server binds it is acceptable for a benchmark.
    def free_port
      server = TCPServer.new("127.0.0.1", 0)
      server.addr[1]
    ensure
      server&.close
    end

    def wait_until_accepting
      deadline = Bench.now + READY_TIMEOUT
      loop do
        TCPSocket.new("127.0.0.1", port).close
        return
      rescue Errno::ECONNREFUSED, Errno::ECONNRESET
        exited = Process.wait(@pid, Process::WNOHANG)
        raise Bench::Failure, "redis-server exited at startup: #{File.read(File.join(@dir, "redis.log"))}" if exited
        raise Bench::Failure, "redis-server did not accept connections on port #{port} within #{READY_TIMEOUT}s" if Bench.now > deadline

        sleep 0.02
      end
    end
  end
end
