# frozen_string_literal: true

require_relative "test_helper"
require "open3"
require "socket"
require "net/http"
require_relative "../ext/solid_jobs/native_build"

# Issue 11: what a newcomer does, on every run. `gem build` and `gem
# install --local` into a fresh GEM_HOME, a fresh app with its own Gemfile
# (`gem "solid-jobs"`, no path to this checkout), `bundle install --local`,
# then the README's commands: a producer script, `bundle exec solid-jobs
# --require ./config/environment` draining real jobs (tasks and Active
# Job), `solid-jobs engine` serving jobs, `solid-jobs warm 0` answering a
# request, `solid-jobs web` serving the dashboard; TERM stops each with exit
# status 0. Once with the source gem (compiled by `gem install`), once with
# the platform gem (`rake native:gem`) installed with no cargo on PATH.
#
# Cost: the source gem's install compiles SolidJobs' three crates (about a
# minute on two cores); CARGO_TARGET_DIR points at this checkout's target/
# so the dependencies come from the cache `rake compile` filled. That still
# runs extconf.rb, the Makefile and the build script as `gem install` does.
# The measured from-scratch install is in README.md.
class UserPathTest < SolidJobsTest
  GEMFILE = <<~RUBY.freeze
    source "https://rubygems.org"

    gem "solid-jobs"
    gem "activejob", "~> 6.1" # Active Job outside Rails
    gem "rack"                # solid-jobs web
    gem "webrick"
    #{SolidJobsCommand::ACTIVE_SUPPORT_GEMS}
  RUBY

  ENVIRONMENT = <<~'RUBY'
    require "solid_jobs"
    require "active_job"
    require "logger"

    ActiveJob::Base.queue_adapter = :solid_jobs
    ActiveJob::Base.logger = Logger.new(nil)

    SolidJobs.configure do |config|
      config.namespace = ENV.fetch("APP_NAMESPACE")
      if (url = ENV["APP_ENGINE_URL"])
        config.backend = :engine
        config.backends = {engine: {adapter: :solid_engine, url: url}}
      end
    end

    # Like RubyGems' resolver log, which Bundler loads: `extend Enumerable`
    # makes the class's include? call each, which it does not have.
    class AuditLog
      extend Enumerable

      def each(&) = [].each(&)
    end

    class Greeting
      include SolidJobs::Task

      def execute_task(path, name) = File.write(path, "greeting #{name} #{Process.pid}\n", mode: "a")
    end

    class GreetingJob < ActiveJob::Base
      def perform(path, name) = File.write(path, "job #{name} #{Process.pid}\n", mode: "a")
    end

    class Multiply
      include SolidJobs::Task

      def execute_task(a, b) = a * b
    end
  RUBY

  ENQUEUE = <<~'RUBY'
    require_relative "config/environment"

    path, count = ARGV
    Greeting.enqueue_many(Array.new(Integer(count)) { |i| [path, "g#{i}"] })
    GreetingJob.perform_later(path, "aj") unless ENV["APP_ENGINE_URL"]
  RUBY

  def setup
    super
    @dirs = []
    @pids = []
  end

  def teardown
    @pids.each do |pid|
      Process.kill("KILL", pid)
      Process.wait(pid)
    rescue Errno::ESRCH, Errno::ECHILD
      nil
    end
    FileUtils.rm_rf(@dirs)
    super
  end

  def tmpdir(prefix)
    (@dirs << Dir.mktmpdir(prefix)).last
  end

  def test_the_source_gem_installs_and_runs_as_the_readme_says
    gem_home = tmpdir("solid-jobs-gem-home")
    gem = File.join(tmpdir("solid-jobs-gem"), "solid-jobs-#{SolidJobs::VERSION}.gem")
    run!({}, "gem", "build", File.join(ROOT, "solid_jobs.gemspec"), "--output", gem, chdir: ROOT)
    started = monotonic
    cache = SolidJobsNativeBuild.checkout_target_dir
    run!({"GEM_HOME" => gem_home, "GEM_PATH" => gem_home, "CARGO_TARGET_DIR" => cache},
         "gem", "install", "--local", "--no-document", gem)
    elapsed = monotonic - started

    installed = File.join(gem_home, "gems", "solid-jobs-#{SolidJobs::VERSION}")
    so = File.join(installed, "lib", "solid_jobs", "solid_jobs.#{RbConfig::CONFIG["DLEXT"]}")
    size = directory_bytes(installed)
    puts "\n  source gem: gem install #{elapsed.round(1)}s (cargo cache: #{cache}), installed #{(size / 1e6).round(1)} MB"
    assert_operator size, :<=, 40_000_000, "installed gem directory within 40 MB"
    refute Dir.exist?(File.join(installed, "target")), "no cargo output in the gem directory"
    assert File.executable?(File.join(installed, "lib", "solid_jobs", "solid-engine-server"))
    sections, = Open3.capture2("readelf", "-S", "-W", so)
    assert_match(/\.text/, sections)
    refute_match(/\.debug_info/, sections, "debug info stripped from the installed extension")

    exercise_app(gem_home, path: ENV.fetch("PATH"))
  end

  def test_the_platform_gem_installs_without_cargo_and_runs_as_the_readme_says
    out, status = Open3.capture2e(RbConfig.ruby, "-S", "rake", "native:gem", chdir: ROOT)
    assert status.success?, out
    gem = File.join(ROOT, "pkg", "solid-jobs-#{SolidJobs::VERSION}-#{Gem::Platform.local}.gem")
    assert File.file?(gem), out

    no_cargo = ENV.fetch("PATH").split(File::PATH_SEPARATOR).reject { |dir| File.exist?(File.join(dir, "cargo")) }
                  .join(File::PATH_SEPARATOR)
    gem_home = tmpdir("solid-jobs-gem-home")
    started = monotonic
    run!({"GEM_HOME" => gem_home, "GEM_PATH" => gem_home, "PATH" => no_cargo}, "gem", "install", "--local", "--no-document", gem)
    elapsed = monotonic - started
    puts "\n  platform gem: gem install #{elapsed.round(2)}s without cargo on PATH"
    assert_operator elapsed, :<, 5, "the platform gem installs in under 5 s"
    assert_empty Dir[File.join(gem_home, "**", "gem_make.out")], "nothing was compiled"

    exercise_app(gem_home, path: no_cargo)
  end

  private

  # The README's "Use it in your app", in a fresh directory.
  def exercise_app(gem_home, path:)
    app = tmpdir("solid-jobs-app")
    FileUtils.mkdir_p(File.join(app, "config"))
    File.write(File.join(app, "Gemfile"), GEMFILE)
    File.write(File.join(app, "config", "environment.rb"), ENVIRONMENT)
    File.write(File.join(app, "enqueue.rb"), ENQUEUE)
    socket_dir = tmpdir("sjw") # short: Unix socket paths are limited to about 100 bytes
    env = {"GEM_HOME" => gem_home, "GEM_PATH" => [gem_home, *Gem.path].join(File::PATH_SEPARATOR), "PATH" => path,
           "SOLID_JOBS_REDIS_URL" => REDIS.url, "APP_NAMESPACE" => @namespace, "SOLID_JOBS_LOG_LEVEL" => "info",
           "SOLID_JOBS_WARM_SOCKET_DIR" => socket_dir}
    run!(env, "bundle", "install", "--local", chdir: app)
    lock = File.read(File.join(app, "Gemfile.lock"))
    assert_match(/^    solid-jobs \(#{Regexp.escape(SolidJobs::VERSION)}(-[\w-]+)?\)$/, lock, "resolved from the installed gem")
    refute_match(/^PATH$/, lock, "not a path gem")

    drains_jobs_from_redis(app, env)
    runs_from_the_rubygems_binstub(app, env, gem_home)
    serves_jobs_with_the_engine(app, env)
    answers_a_warm_pool_request(app, env, socket_dir)
    serves_the_dashboard(app, env)
  end

  def drains_jobs_from_redis(app, env)
    ledger = ledger_path("redis")
    run!(env, "bundle", "exec", "ruby", "enqueue.rb", ledger, "10", chdir: app)
    worker = start(app, env, "worker", "bundle", "exec", "solid-jobs", "--require", "./config/environment", "--concurrency", "2")
    eventually("10 tasks and an Active Job job ran") { File.exist?(ledger) && File.readlines(ledger).size == 11 }
    assert_equal ["greeting", "job"], File.readlines(ledger).map { |l| l.split.first }.uniq.sort
    assert_equal [worker.to_s], File.readlines(ledger).map { |l| l.split.last }.uniq
    stop(worker, app, "worker")
    assert_equal 0, redis.llen(key("channel:default"))
  end

  # `solid-jobs` without Bundler: the binstub `gem install` wrote.
  def runs_from_the_rubygems_binstub(app, env, gem_home)
    ledger = ledger_path("binstub")
    run!(env, "bundle", "exec", "ruby", "enqueue.rb", ledger, "3", chdir: app)
    worker = start(app, env, "binstub-worker", File.join(gem_home, "bin", "solid-jobs"), "--require", "./config/environment")
    eventually("3 tasks and an Active Job job ran") { File.exist?(ledger) && File.readlines(ledger).size == 4 }
    stop(worker, app, "binstub-worker")
  end

  def serves_jobs_with_the_engine(app, env)
    url = "unix://#{File.join(tmpdir("sje"), "engine.sock")}"
    engine = start(app, env, "engine", "bundle", "exec", "solid-jobs", "engine", "--listen", url)
    engine_env = env.merge("APP_ENGINE_URL" => url, "SOLID_JOBS_REDIS_URL" => "redis://127.0.0.1:#{RedisServer.closed_port}/0")
    eventually("the engine listening") { File.socket?(url.delete_prefix("unix://")) }
    ledger = ledger_path("engine")
    run!(engine_env, "bundle", "exec", "ruby", "enqueue.rb", ledger, "5", chdir: app)
    worker = start(app, engine_env, "engine-worker", "bundle", "exec", "solid-jobs", "--require", "./config/environment")
    eventually("5 tasks ran from the engine") { File.exist?(ledger) && File.readlines(ledger).size == 5 }
    stop(worker, app, "engine-worker")
    stop(engine, app, "engine")
  end

  def answers_a_warm_pool_request(app, env, socket_dir)
    warm = start(app, env, "warm", "bundle", "exec", "solid-jobs", "warm", "0")
    eventually("warm worker 0 ready") { File.read(log(app, "warm")).include?("warm worker 0 ready") }
    before = ENV["SOLID_JOBS_WARM_SOCKET_DIR"]
    begin
      ENV["SOLID_JOBS_WARM_SOCKET_DIR"] = socket_dir # where WarmPool.call looks for worker 0
      assert_equal 42, SolidJobs::WarmPool.call("Multiply", [6, 7])
    ensure
      ENV["SOLID_JOBS_WARM_SOCKET_DIR"] = before
    end
    stop(warm, app, "warm")
  end

  def serves_the_dashboard(app, env)
    web = start(app, env, "web", "bundle", "exec", "solid-jobs", "web", "--require", "./config/environment", "--port", "0")
    port = eventually("the dashboard listening") { File.read(log(app, "web"))[%r{listening on http://127\.0\.0\.1:(\d+)/}, 1] }
    response = Net::HTTP.get_response(URI("http://127.0.0.1:#{port}/"))
    assert_equal "200", response.code
    assert_match(/SolidJobs/, response.body)
    stop(web, app, "web")
  end

  def log(app, name) = File.join(app, "#{name}.log")

  def start(app, env, name, *command)
    pid = Process.spawn(clean_env(env), *command, unsetenv_others: true, chdir: app, out: [log(app, name), "a"],
                                                  err: [log(app, name), "a"])
    @pids << pid
    pid
  end

  # TERM, then exit status 0.
  def stop(pid, app, name)
    Process.kill("TERM", pid)
    deadline = monotonic + 30
    until (status = Process.wait2(pid, Process::WNOHANG)&.last)
      flunk("#{name} did not exit within 30s after TERM:\n#{File.read(log(app, name))}") if monotonic > deadline
      sleep 0.02 # poll interval of the bounded wait (its failure shows the log, as it is then)
    end
    @pids.delete(pid)
    assert_equal 0, status.exitstatus, "#{name}: #{File.read(log(app, name))}"
  end

  def run!(env, *command, chdir: Dir.pwd)
    out, status = Open3.capture2e(clean_env(env), *command, unsetenv_others: true, chdir: chdir)
    assert status.success?, "#{command.join(" ")} failed:\n#{out}"
    out
  end

  # The user's shell: this process's environment without the suite's
  # Bundler settings, plus `extra`.
  def clean_env(extra)
    base = defined?(Bundler) ? Bundler.unbundled_env : ENV.to_h
    base.merge("BUNDLE_SILENCE_ROOT_WARNING" => "1").merge(extra)
  end

  def directory_bytes(dir)
    Dir.glob(File.join(dir, "**", "*"), File::FNM_DOTMATCH).sum { |f| File.file?(f) ? File.size(f) : 0 }
  end

  def monotonic = Process.clock_gettime(Process::CLOCK_MONOTONIC)
end
