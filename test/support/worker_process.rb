# frozen_string_literal: true

require "json"
require_relative "solid_jobs_command"

# A `solid-jobs` worker as a real child process, for tests and the torture
# driver: started with the test app the way users start one (`bundle exec
# solid-jobs`, see SolidJobsCommand), stopped with real signals.
class WorkerProcess
  ROOT = File.expand_path("../..", __dir__)
  APP = File.join(ROOT, "test", "support", "cli_app.rb")

  attr_reader :pid, :log

  def initialize(redis_url:, namespace:, log:, args: [], env: {})
    @redis_url = redis_url
    @namespace = namespace
    @log = log
    @args = args
    @env = {"SOLID_JOBS_TEST_NAMESPACE" => namespace, "SOLID_JOBS_LOG_LEVEL" => "info"}.merge(env)
  end

  def start
    @pid = SolidJobsCommand.spawn(@env, "--require", APP, "--redis-url", @redis_url, *@args,
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
