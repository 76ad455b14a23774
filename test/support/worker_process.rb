# frozen_string_literal: true

require "rbconfig"
require "json"

# A `solid-jobs` worker as a real child process, for tests and the torture
# driver: started with the test app, stopped with real signals.
class WorkerProcess
  ROOT = File.expand_path("../..", __dir__)
  EXE = File.join(ROOT, "exe", "solid-jobs")
  APP = File.join(ROOT, "test", "support", "cli_app.rb")

  attr_reader :pid, :log

  # `app`: the file `--require` loads (nil: none at all).
  def initialize(redis_url:, namespace:, log:, args: [], env: {}, app: APP)
    @app = app
    @redis_url = redis_url
    @namespace = namespace
    @log = log
    @args = args
    @env = {"SOLID_JOBS_TEST_NAMESPACE" => namespace, "SOLID_JOBS_LOG_LEVEL" => "info"}.merge(env)
  end

  def start
    required = @app ? ["--require", @app] : []
    @pid = Process.spawn(@env, RbConfig.ruby, EXE, *required, "--redis-url", @redis_url, *@args,
                         out: [@log, "a"], err: [@log, "a"])
    self
  end

  def signal(name)
    Process.kill(name, @pid)
  rescue Errno::ESRCH
    nil
  end

  # Waits for exit; SIGKILLs and raises after `timeout` seconds.
  def wait(timeout: 30)
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + timeout
    loop do
      _, status = Process.wait2(@pid, Process::WNOHANG)
      return status if status

      if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline
        signal("KILL")
        Process.wait(@pid)
        raise "worker #{@pid} did not exit within #{timeout}s:\n#{File.read(@log)}"
      end
      sleep 0.02
    end
  rescue Errno::ECHILD
    nil
  end

  def kill!
    signal("KILL")
    wait(timeout: 10)
  end

  # The node id this process registered, read from its heartbeat record.
  def node_id(redis)
    redis.smembers("#{@namespace}:nodes").find do |id|
      record = redis.get("#{@namespace}:node:#{id}")
      record && JSON.parse(record)["pid"] == @pid
    end
  end
end
