# frozen_string_literal: true

require "net/http"
require_relative "child_process"

# `solid-jobs web` as a real child process on a free port (--port 0): the
# port is read from the line the server prints once it listens.
class WebServerProcess < ChildProcess
  EXE = File.join(ROOT, "exe", "solid-jobs")
  STOP_TIMEOUT = 10

  attr_reader :port

  def initialize(redis_url:, namespace:, log:, args: [], env: {})
    super([RbConfig.ruby, EXE, "web", "--port", "0", "--redis-url", redis_url, "--namespace", namespace, *args],
          log: log, env: env)
  end

  def start(timeout: 30)
    File.write(log, "") # the port is read from this run's output only
    super()
    wait_until_ready(timeout) { (@port = output[%r{listening on http://127\.0\.0\.1:(\d+)/}, 1]&.to_i) }
    self
  end

  def url(path = "/") = "http://127.0.0.1:#{@port}#{path}"

  def get(path, user: nil, password: nil)
    request = Net::HTTP::Get.new(path)
    request.basic_auth(user, password) if user
    Net::HTTP.start("127.0.0.1", @port, open_timeout: 5, read_timeout: 30) { |http| http.request(request) }
  end

  def output = File.exist?(log) ? File.read(log) : ""

  # TERM, then the exit status (nil when KILL was needed after `timeout`).
  def stop(timeout: STOP_TIMEOUT) = super("TERM", timeout: timeout)
end
