# frozen_string_literal: true

require "json"
require_relative "child_process"
require_relative "solid_jobs_command"

# A `solid-jobs` worker as a real child process, for tests, the torture
# driver and the benchmarks: started with an app file (the test app unless
# told otherwise), stopped with real signals.
#
# Tests start it the way users do, `bundle exec solid-jobs` through the
# gem's binstub (SolidJobsCommand). Benchmarks pass `bundled: false` and run
# exe/solid-jobs directly, so Bundler's memory and start-up are not counted
# in their figures.
class WorkerProcess < ChildProcess
  EXE = File.join(ROOT, "exe", "solid-jobs")
  APP = File.join(ROOT, "test", "support", "cli_app.rb")

  # `app`: the file `--require` loads; `children`, `chdir`: see ChildProcess;
  # `ruby`: the Ruby that runs exe/solid-jobs when not bundled (its
  # environment comes in `env`, see OtherRuby).
  def initialize(redis_url:, namespace:, log:, args: [], env: {}, app: APP, children: nil, bundled: true, chdir: ROOT,
                 ruby: RbConfig.ruby)
    @namespace = namespace
    args = ["--require", app, "--redis-url", redis_url, *args]
    env = {"SOLID_JOBS_TEST_NAMESPACE" => namespace, "SOLID_JOBS_LOG_LEVEL" => "info"}.merge(env)
    if bundled
      super(SolidJobsCommand.argv(*args), log: log, env: SolidJobsCommand.env(env), children: children, chdir: chdir,
                                          spawn_options: {unsetenv_others: true})
    else
      super([ruby, EXE, *args], log: log, env: env, children: children, chdir: chdir)
    end
  end

  # The node id this process registered, read from its heartbeat record.
  def node_id(redis)
    redis.smembers("#{@namespace}:nodes").find do |id|
      record = redis.get("#{@namespace}:node:#{id}")
      record && JSON.parse(record)["pid"] == @pid
    end
  end
end
