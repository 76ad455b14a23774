# frozen_string_literal: true

require "socket"
require "tmpdir"
require "fileutils"
require_relative "child_process"

# A real solid-engine-server on a private Unix socket (built by `rake
# engine:build`), its data directory beside the socket for the durable
# modes. `dir` must be short: socket paths are limited to about 100 bytes.
class EngineServer < ChildProcess
  BINARY = File.join(ROOT, "target", "release", "solid-engine-server")
  READY_TIMEOUT = 10
  # The server answers in-flight requests and fsyncs its log on TERM,
  # bounding its own drain at 5 s.
  STOP_TIMEOUT = 15

  attr_reader :dir, :socket, :durability

  # binary: another build of the server (a benchmark comparing two).
  def initialize(durability: "memory", lease_ms: 30_000, password: nil, extra: [], dir: nil, children: nil,
                 binary: BINARY)
    @durability = durability
    @dir = dir || Dir.mktmpdir("solid-engine")
    @socket = File.join(@dir, "engine.sock")
    args = ["--listen", url, "--durability", durability, "--lease-ms", lease_ms.to_s, *extra]
    args += ["--data-dir", File.join(@dir, "data")] unless durability == "memory"
    # The password through the environment, as docs/protocol.md advises:
    # `--password` would show it in /proc/<pid>/cmdline.
    # nil unsets a value the test process itself may have.
    env = {"SOLID_ENGINE_PASSWORD" => password}
    @binary = binary
    super([binary, *args], log: File.join(@dir, "server.log"), env: env, children: children)
  end

  def url = "unix://#{@socket}"

  # The socket file appears at bind, before accept starts: a PING that is
  # answered is the real sign of readiness.
  def start
    raise ProcessError, "#{@binary} is missing: run `bundle exec rake engine:build`" unless File.executable?(@binary)

    FileUtils.mkdir_p(@dir)
    super
    wait_until_ready(READY_TIMEOUT) { ping }
    self
  end

  def stop(signal = "TERM", timeout: STOP_TIMEOUT) = super

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
