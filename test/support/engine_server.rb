# frozen_string_literal: true

require "tmpdir"
require "fileutils"
require "socket"
require_relative "server_process"

# A real solid-engine-server process on a private Unix socket, for tests
# and benchmarks (built by `rake engine:build`).
class EngineServer
  include ServerProcess

  ROOT = File.expand_path("../..", __dir__)
  BINARY = File.join(ROOT, "target", "release", "solid-engine-server")

  attr_reader :dir, :socket, :log

  def initialize(durability: "memory", lease_ms: 30_000, password: nil, extra: [])
    @dir = Dir.mktmpdir("solid-engine")
    @socket = File.join(@dir, "engine.sock")
    @log = File.join(@dir, "server.log")
    @args = ["--listen", "unix://#{@socket}", "--durability", durability, "--lease-ms", lease_ms.to_s, *extra]
    @args += ["--data-dir", File.join(@dir, "data")] unless durability == "memory"
    @args += ["--password", password] if password
  end

  def url = "unix://#{@socket}"

  def start
    raise "#{BINARY} is missing: run `bundle exec rake engine:build`" unless File.executable?(BINARY)

    @pid = Process.spawn(BINARY, *@args, out: [@log, "a"], err: [@log, "a"])
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 10
    until ping
      raise "solid-engine-server did not start:\n#{File.read(@log)}" if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline

      sleep 0.02
    end
    self
  end

  def ping
    s = UNIXSocket.new(@socket)
    s.write("*1\r\n$4\r\nPING\r\n")
    s.gets&.chomp == "+PONG"
  rescue SystemCallError, IOError
    false
  ensure
    s&.close
  end


  def cleanup
    stop
    FileUtils.rm_rf(@dir)
  end
end
