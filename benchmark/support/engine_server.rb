# frozen_string_literal: true

require "socket"
require "fileutils"
require_relative "common"

module Bench
  # A throwaway solid-engine-server listening on a Unix socket in `dir`
  # (created here, removed by #stop), with its data directory there too for
  # the durable modes. Built by `rake engine:build`.
  class EngineServer
    BINARY = File.expand_path("../../target/release/solid-engine-server", __dir__)
    READY_TIMEOUT = 10
    # The server answers in-flight requests and fsyncs its log on TERM; it
    # bounds its own drain at 5 s.
    STOP_TIMEOUT = 15

    attr_reader :durability

    # The server process, for /proc readings (nil when not running).
    def pid = @pid

    def initialize(children, dir, durability:)
      @children = children
      @dir = dir
      @durability = durability
    end

    def socket_path = File.join(@dir, "engine.sock")
    def url = "unix://#{socket_path}"
    def log_path = File.join(@dir, "server.log")

    def start
      raise Failure, "#{BINARY} is missing; run `bundle exec rake engine:build`" unless File.executable?(BINARY)

      FileUtils.mkdir_p(@dir)
      @pid = @children.spawn(BINARY, *arguments, in: File::NULL, out: log_path, err: [:child, :out])
      wait_until_accepting
      self
    rescue Failure
      stop # a server that never became ready must not linger
      raise
    end

    # Graceful stop with TERM, as in production. Returns nil after a clean
    # exit, or a description of what went wrong (no exit within
    # STOP_TIMEOUT, so it was killed; or a non-zero status), for the caller
    # to report. Safe to call more than once and after a failed start.
    def stop
      return nil unless @pid

      problem = terminate
      problem && "solid-engine-server (#{@durability}) #{problem}; its log:\n#{Bench.tail(log_path)}"
    ensure
      @pid = nil
      FileUtils.rm_rf(@dir)
    end

    private

    def arguments
      args = ["--listen", url, "--durability", @durability]
      args += ["--data-dir", File.join(@dir, "data-#{@durability}")] unless @durability == "memory"
      args
    end

    def terminate
      Process.kill("TERM", @pid)
      status = Bench.wait_for_exit(@pid, STOP_TIMEOUT)
      unless status
        Bench.kill_child(@pid)
        return "did not exit within #{STOP_TIMEOUT}s of TERM and was killed"
      end
      status.success? ? nil : "exited with #{status.inspect} after TERM"
    rescue Errno::ESRCH, Errno::ECHILD
      nil
    end

    # The socket file appears at bind, before accept starts; a connection
    # that succeeds is the real sign of readiness.
    def wait_until_accepting
      deadline = Bench.now + READY_TIMEOUT
      loop do
        UNIXSocket.new(socket_path).close
        return
      rescue Errno::ENOENT, Errno::ECONNREFUSED
        if (status = Process.wait2(@pid, Process::WNOHANG)&.last)
          @pid = nil
          raise Failure, "solid-engine-server exited at startup (#{status.inspect}): #{Bench.tail(log_path)}"
        end
        raise Failure, "solid-engine-server did not accept connections on #{socket_path} within #{READY_TIMEOUT}s" if Bench.now > deadline

        sleep 0.02
      end
    end
  end
end
