# frozen_string_literal: true

require "json"
require_relative "child_process"

# A `solid-jobs` worker as a real child process, for tests, the torture
# driver and the benchmarks: started with an app file (the test app unless
# told otherwise), stopped with real signals.
class WorkerProcess < ChildProcess
  EXE = File.join(ROOT, "exe", "solid-jobs")
  APP = File.join(ROOT, "test", "support", "cli_app.rb")

  # `app`: the file `--require` loads; `children`: see ChildProcess.
  def initialize(redis_url:, namespace:, log:, args: [], env: {}, app: APP, children: nil)
    @namespace = namespace
    super([RbConfig.ruby, EXE, "--require", app, "--redis-url", redis_url, *args], log: log,
          env: {"SOLID_JOBS_TEST_NAMESPACE" => namespace, "SOLID_JOBS_LOG_LEVEL" => "info"}.merge(env), children: children)
  end

  # The node id this process registered, read from its heartbeat record.
  def node_id(redis)
    redis.smembers("#{@namespace}:nodes").find do |id|
      record = redis.get("#{@namespace}:node:#{id}")
      record && JSON.parse(record)["pid"] == @pid
    end
  end
end
