# frozen_string_literal: true

require_relative "test_helper"
require "open3"
require "tmpdir"
require_relative "support/bundle_probe"

# A Rails app that loads its code lazily (config.eager_load = false, the
# development default; Zeitwerk autoloads app/tasks): a real `bundle exec
# solid-jobs` worker finds a task's own `recurring:` schedule and gives a
# config.recurring tick the task's own channel and max_failures, as a node
# that had the classes loaded would; `solid-jobs recurring` lists what the
# worker runs; a schedule whose task resolves to nothing and that names no
# channel stops the worker at start. The app lives in a directory of its
# own, run through the example app's bundle (railties, zeitwerk).
class RecurringRailsTest < SolidJobsTest
  GEMFILE = File.expand_path("../examples/rails_app/Gemfile", __dir__)

  APPLICATION = <<~RUBY
    require "logger"
    require "rails"
    require "active_job/railtie"
    Bundler.require(*Rails.groups)
    class ProbeApp < Rails::Application
      config.load_defaults 6.1
      config.autoloader = :zeitwerk
      config.root = File.expand_path("..", __dir__)
      config.eager_load = false
      config.logger = Logger.new(nil)
      config.secret_key_base = "test-only"
    end
  RUBY

  INITIALIZER = <<~RUBY
    schedules = {
      # An autoloaded task: its channel and max_failures are its own.
      "configured" => {task: "ConfiguredTick", every: 1},
      # A task only another app defines: allowed with a channel.
      "elsewhere" => {task: "OtherAppTask", every: 1, channel: "elsewhere"}
    }
    schedules["ghost"] = {task: "GhostTask", every: 1} if ENV["PROBE_GHOST"]
    SolidJobs.configure do |c|
      c.namespace = ENV.fetch("SOLID_JOBS_TEST_NAMESPACE")
      c.heartbeat_interval = 0.5
      c.recovery_delay = 2
      c.recurring = schedules
    end
  RUBY

  TASKS = {
    "own_tick.rb" => <<~RUBY,
      class OwnTick
        include SolidJobs::Task
        task_options channel: "own", max_failures: 4, recurring: {every: 1}
        def execute_task = nil
      end
    RUBY
    "configured_tick.rb" => <<~RUBY
      class ConfiguredTick
        include SolidJobs::Task
        task_options channel: "configured", max_failures: 3
        def execute_task = nil
      end
    RUBY
  }.freeze

  def setup
    super
    BundleProbe.skip_unless_loads(self, GEMFILE, "Rails 6.1 (examples/rails_app)")
    @root = Dir.mktmpdir("solid-jobs-rails-recurring")
    FileUtils.mkdir_p(File.join(@root, "config", "initializers"))
    FileUtils.mkdir_p(File.join(@root, "app", "tasks"))
    File.write(File.join(@root, "config", "application.rb"), APPLICATION)
    File.write(File.join(@root, "config", "environment.rb"), "require_relative \"application\"\nProbeApp.initialize!\n")
    File.write(File.join(@root, "config", "initializers", "solid_jobs.rb"), INITIALIZER)
    TASKS.each { |file, source| File.write(File.join(@root, "app", "tasks", file), source) }
  end

  def teardown
    @worker&.stop
    FileUtils.rm_rf(@root) if @root
    super
  end

  def environment(extra = {})
    {"BUNDLE_GEMFILE" => GEMFILE, "RAILS_ENV" => "development", "SOLID_JOBS_TEST_NAMESPACE" => @namespace,
     "SOLID_JOBS_LOG_LEVEL" => "info"}.merge(extra)
  end

  # `bundle exec solid-jobs ARGS` in the app, through the example's bundle.
  def solid_jobs(*args, env: {})
    Bundler.with_unbundled_env do
      Open3.capture3(environment(env), "bundle", "exec", "solid-jobs", *args, chdir: @root)
    end
  end

  def app_args = ["--require", File.join(@root, "config", "environment.rb"), "--redis-url", REDIS.url]

  # It serves a channel no tick goes to: the ticks stay where they were
  # enqueued, to be read.
  def start_worker(env: {}, args: [])
    log = File.join(@ledger_dir, "worker.log")
    command = ["bundle", "exec", "solid-jobs", *app_args, "--channel", "idle", "--execution-mode", "thread",
               "--concurrency", "1", *args]
    @worker = Bundler.with_unbundled_env { ChildProcess.new(command, log: log, env: environment(env), chdir: @root).start }
  end

  def jobs(channel) = redis.lrange(key("channel:#{channel}"), 0, -1).map { |raw| JSON.parse(raw) }

  def test_a_lazily_loaded_apps_schedules_tick_on_their_tasks_own_channels
    start_worker
    eventually("ticks on the tasks' own channels (#{@worker.log_tail})", timeout: 40) do
      raise "the worker exited: #{@worker.log_tail}" if @worker.exited?

      %w[own configured elsewhere].all? { |channel| jobs(channel).any? }
    end
    assert_match(/recurring scheduler: configured, elsewhere, OwnTick/, File.read(@worker.log))
    own = jobs("own")
    assert_equal ["OwnTick"], own.map { |j| j["task"] }.uniq
    assert_equal [4], own.map { |j| j["max_failures"] }.uniq
    assert_equal ["OwnTick"], own.map { |j| j.dig("meta", "schedule") }.uniq
    configured = jobs("configured")
    assert_equal ["ConfiguredTick"], configured.map { |j| j["task"] }.uniq
    assert_equal [3], configured.map { |j| j["max_failures"] }.uniq, "the task's own max_failures"
    elsewhere = jobs("elsewhere")
    assert_equal ["OtherAppTask"], elsewhere.map { |j| j["task"] }.uniq
    assert_equal [SolidJobs::Configuration::DEFAULTS.fetch(:default_task_options).fetch(:max_failures)],
                 elsewhere.map { |j| j["max_failures"] }.uniq, "a task this app does not define: the default max_failures"
    assert_empty jobs("default"), "no tick on the default channel"

    out, err, status = solid_jobs("recurring", "--json", *app_args)
    assert status.success?, err
    rows = JSON.parse(out).to_h { |r| [r["name"], r] }
    assert_equal({"configured" => ["ConfiguredTick", "configured"], "elsewhere" => ["OtherAppTask", "elsewhere"],
                  "OwnTick" => %w[OwnTick own]}, rows.transform_values { |r| [r["task"], r["channel"]] })
    assert rows.values.all? { |r| r["configured"] && r["last_job_id"] }, "each listed with its last job"
  end

  def test_a_task_that_resolves_to_nothing_without_a_channel_stops_the_worker_at_start
    message = /schedule "ghost": task GhostTask is not defined, so its channel is unknown: define the task .*channel:/
    start_worker(env: {"PROBE_GHOST" => "1"})
    status = @worker.wait(timeout: 30) # a worker that started anyway is killed, and the test fails
    assert_equal 64, status.exitstatus, @worker.log_tail
    assert_match(message, File.read(@worker.log))
    assert_empty redis.keys(key("*")), "nothing enqueued, no node registered"

    _out, err, status = solid_jobs("recurring", *app_args, env: {"PROBE_GHOST" => "1"})
    assert_equal 64, status.exitstatus, err
    assert_match(message, err)
  end

  # Without the scheduler too: the node decides its lanes from the task
  # classes, so a lazily loading app is loaded at every node's start.
  def test_a_node_without_the_scheduler_loads_the_apps_tasks_too
    start_worker(args: ["--no-scheduler"])
    eventually("the node started (#{@worker.log_tail})", timeout: 40) do
      raise "the worker exited: #{@worker.log_tail}" if @worker.exited?

      File.read(@worker.log).include?(" started: ")
    end
    log = File.read(@worker.log)
    refute_match(/no task classes are loaded/, log)
    refute_match(/recurring scheduler/, log)
    # A heartbeat of the node from after two more ticks fell due: a
    # scheduler would have enqueued them (and the ones due at its start).
    id = eventually("the node registered") { redis.smembers(key("nodes")).first }
    now = redis_now_ms
    second_tick = now - (now % 1000) + 2000
    eventually("a heartbeat after the second tick due") { heartbeat_stamp(id).to_i > second_tick + 500 }
    assert_empty redis.keys(key("channel:*")), "no tick enqueued by a node without the scheduler"
  end

  private

  def redis_now_ms
    s, us = redis.time
    (s * 1000) + (us / 1000)
  end
end
