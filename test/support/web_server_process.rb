# frozen_string_literal: true

require "rbconfig"
require "net/http"

# `solid-jobs web` as a real child process on a free port (--port 0): the
# port is read from the line the server prints once it listens.
class WebServerProcess
  ROOT = File.expand_path("../..", __dir__)
  EXE = File.join(ROOT, "exe", "solid-jobs")

  attr_reader :pid, :port, :log

  def initialize(redis_url:, namespace:, log:, args: [], env: {})
    @args = ["web", "--port", "0", "--redis-url", redis_url, "--namespace", namespace, *args]
    @env = env
    @log = log
  end

  def start(timeout: 30)
    @pid = Process.spawn(@env, RbConfig.ruby, EXE, *@args, out: [@log, "w"], err: [@log + ".err", "w"])
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + timeout
    until (@port = File.read(@log)[%r{listening on http://127\.0\.0\.1:(\d+)/}, 1]&.to_i)
      if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline || Process.wait(@pid, Process::WNOHANG)
        stop
        raise "solid-jobs web did not start:\n#{output}"
      end
      sleep 0.05
    end
    self
  end

  def url(path = "/") = "http://127.0.0.1:#{@port}#{path}"

  def get(path, user: nil, password: nil)
    request = Net::HTTP::Get.new(path)
    request.basic_auth(user, password) if user
    Net::HTTP.start("127.0.0.1", @port, open_timeout: 5, read_timeout: 30) { |http| http.request(request) }
  end

  def output = [@log, @log + ".err"].map { |f| File.exist?(f) ? File.read(f) : "" }.join

  # TERM, then the exit status (KILL after `timeout` seconds).
  def stop(timeout: 10)
    return nil unless @pid

    Process.kill("TERM", @pid)
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + timeout
    loop do
      _, status = Process.wait2(@pid, Process::WNOHANG)
      return status if status

      if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline
        Process.kill("KILL", @pid)
        Process.wait(@pid)
        return nil
      end
      sleep 0.05
    end
  rescue Errno::ESRCH, Errno::ECHILD
    nil
  ensure
    @pid = nil
  end
end
