# frozen_string_literal: true

require_relative "test_helper"

# The configuration file (`solid-jobs -C`, config/solid_jobs.yml): what a
# real worker started with it runs, which settings win, and the errors a
# bad file gives, read in-process where the message is the point.
class ConfigFileTest < SolidJobsTest
  EXAMPLE = File.join(ROOT, "examples", "config", "solid_jobs.yml")
  SECRET = "hunter2-#{SecureRandom.hex(4)}".freeze

  def setup
    super
    @workers = []
    @env_before = ENV.to_h.slice("RAILS_ENV", "RACK_ENV")
    ENV.delete("RAILS_ENV")
    ENV.delete("RACK_ENV")
  end

  def teardown
    @workers.each { |w| w.stop(timeout: 15) }
    %w[RAILS_ENV RACK_ENV].each { |k| @env_before.key?(k) ? ENV[k] = @env_before[k] : ENV.delete(k) }
    super
  end

  # --- real workers -------------------------------------------------------

  def test_a_worker_started_with_dash_c_runs_the_files_settings_for_rails_env
    file = write_file("elsewhere/jobs.yml", <<~YAML)
      default: &default
        concurrency: 1
        channels:
          - critical,3
          - {name: default, weight: 2}
        channel_order: priority
      development:
        <<: *default
      production:
        <<: *default
        concurrency: <%= ENV.fetch("SOLID_JOBS_TEST_CONCURRENCY") %>
    YAML
    worker = start_worker("-C", file, env: {"RAILS_ENV" => "production", "SOLID_JOBS_TEST_CONCURRENCY" => "3"})
    description = running_description(worker)
    assert_equal 3, description["concurrency"], "production's value, through ERB"
    assert_equal [["critical", 3], ["default", 2]], description["channels"]
    log = File.read(worker.log)
    assert_includes log, "configuration file #{file} (environment production)"
    assert_match(/started: 3 ractor worker\(s\), channels critical\(3\), default\(2\) \(priority\)/, log)

    CriticalTask.enqueue(ledger_path, "critical-job")
    eventually("the job on a channel only the file names ran") { ledger_lines.map { |l| l.split.first } == ["critical-job"] }
    assert_equal worker.pid.to_s, ledger_lines.first.split.last
  end

  def test_environment_flag_beats_rails_env_and_is_the_apps_environment_too
    marker = ledger_path("rails_env")
    dir = app_dir(<<~YAML, app_code: "File.write(#{marker.inspect}, ENV['RAILS_ENV'].to_s)")
      production:
        concurrency: 4
      staging:
        concurrency: 2
        channels: [staging_only]
    YAML
    worker = start_worker("--environment", "staging", app: dir, env: {"RAILS_ENV" => "production"})
    description = running_description(worker)
    assert_equal 2, description["concurrency"]
    assert_equal [["staging_only", 1]], description["channels"]
    assert_equal "staging", File.read(marker), "-e sets RAILS_ENV before the app loads"
    assert_includes File.read(worker.log), "configuration file #{File.join(dir, "config", "solid_jobs.yml")} " \
                                           "(environment staging)"
  end

  # Flags beat the file, the file beats the app's SolidJobs.configure, and
  # what the file does not set keeps the app's value.
  def test_flags_beat_the_file_which_beats_the_apps_configure
    app_code = <<~RUBY
      SolidJobs.configure do |c|
        c.concurrency = 5
        c.channels = ["from_app"]
        c.execution_mode = :thread
      end
    RUBY
    dir = app_dir(<<~YAML, app_code: app_code)
      concurrency: 3
      channels: [from_file, "critical,2"]
    YAML
    from_file = running_description(start_worker(app: dir))
    assert_equal [3, [["from_file", 1], ["critical", 2]], "thread"],
                 from_file.values_at("concurrency", "channels", "execution_mode")

    from_flags = running_description(start_worker("--channel", "from_flag,4", app: dir))
    assert_equal [3, [["from_flag", 4]], "thread"], from_flags.values_at("concurrency", "channels", "execution_mode")
  end

  # Without -C: APP/config/solid_jobs.yml when --require names the app's
  # directory (above), else config/solid_jobs.yml under the current directory.
  def test_the_default_file_is_found_in_the_current_directory
    dir = app_dir("concurrency: 2\nchannels: [found_in_cwd]\n")
    worker = start_worker(app: File.join(dir, "config", "environment.rb"), chdir: dir)
    assert_equal [2, [["found_in_cwd", 1]]], running_description(worker).values_at("concurrency", "channels")
    assert_includes File.read(worker.log), "configuration file config/solid_jobs.yml (environment development)"
  end

  def test_without_a_file_nothing_changes
    dir = app_dir(nil)
    worker = start_worker("--concurrency", "1", app: dir, chdir: dir)
    assert_equal [1, [["default", 1]]], running_description(worker).values_at("concurrency", "channels")
    refute_includes File.read(worker.log), "configuration file"
  end

  # --- exit 64, before the app loads or any worker starts -------------------

  def test_a_missing_dash_c_file_exits_64_before_loading_the_app
    marker = ledger_path("app_loaded")
    dir = app_dir(nil, app_code: "File.write(#{marker.inspect}, 'yes')")
    out, err, status = run_cli("--require", dir, "-C", "no/such.yml")
    assert_equal 64, status.exitstatus, err
    assert_equal "solid-jobs: config file no/such.yml: no such file\n", err.lines.first
    assert_empty out
    refute File.exist?(marker), "the app was not loaded"
  end

  def test_bad_files_exit_64_with_one_message_naming_the_file_and_no_worker_starts
    cases = {
      "concurrency: 2\nproduction:\n  concurency: 3\n" =>
        /\Asolid-jobs: \S+solid_jobs\.yml:3: unknown key "concurency" in section production \(did you mean "concurrency"\?\)\n\z/,
      "channels: [a\nconcurrency: 2\n" => %r{\Asolid-jobs: \S+/config/solid_jobs\.yml:\d: YAML syntax error: },
      "concurrency: 0\n" =>
        %r{\Asolid-jobs: \S+/config/solid_jobs\.yml:1: invalid concurrency 0: expected an Integer from 1 to 1024\n\z},
      "production:\n  concurrency: 2\n" =>
        %r{\Asolid-jobs: \S+/config/solid_jobs\.yml: no "development" section for environment development},
      "concurrency: !ruby/object:Object {}\n" => /Tried to load unspecified class: Object/
    }
    cases.each do |yaml, pattern|
      dir = app_dir(yaml)
      out, err, status = run_cli("--require", dir)
      assert_equal 64, status.exitstatus, "#{yaml}: #{err}"
      assert_match pattern, err.lines.first, yaml
      assert_equal "Run `solid-jobs --help` for usage.\n", err.lines.last
      assert_equal 2, err.lines.size, err
      assert_empty out
    end
    assert_empty redis.smembers(key("nodes")), "no worker registered"
  end

  def test_a_bad_file_never_prints_the_password_it_holds
    dir = app_dir(<<~YAML)
      redis_url: redis://:<%= ENV["SOLID_JOBS_TEST_SECRET"] %>@127.0.0.1:notaport/0
    YAML
    _, err, status = run_cli("--require", dir, env: {"SOLID_JOBS_TEST_SECRET" => SECRET})
    assert_equal 64, status.exitstatus, err
    assert_match(%r{solid_jobs\.yml:1: invalid redis_url "redis://:\*\*\*@127\.0\.0\.1:notaport/0"}, err)
    refute_includes err, SECRET
  end

  # `solid-jobs web` reads the same file for where the jobs are.
  def test_solid_jobs_web_takes_redis_url_and_namespace_from_the_file
    file = write_file("web.yml", "production:\n  redis_url: #{REDIS.url}\n  namespace: #{@namespace}_web\n")
    log = ledger_path("web.log")
    exe = File.join(ROOT, "exe", "solid-jobs")
    web = ChildProcess.new([RbConfig.ruby, exe, "web", "--port", "0", "-C", file, "-e", "production"], log: log).start
    port = eventually("the dashboard listens") { File.read(log)[%r{listening on http://127\.0\.0\.1:(\d+)/ \(namespace (\S+),}] }
    assert_includes port, "(namespace #{@namespace}_web,"
    assert web.stop.success?, File.read(log)

    bad = write_file("bad_web.yml", "namespaec: x\n")
    _, err, status = Open3.capture3(RbConfig.ruby, exe, "web", "-C", bad)
    assert_equal 64, status.exitstatus, err
    assert_match(/\Asolid-jobs web: \S+bad_web\.yml:1: unknown key "namespaec" \(did you mean "namespace"\?\)/, err)
  ensure
    web&.kill! if web&.running?
  end

  # So does `solid-jobs archive`: without the file's redis_url it would
  # try the default one, where no Redis listens.
  def test_solid_jobs_archive_takes_redis_url_and_namespace_from_the_file
    file = write_file("archive.yml", "redis_url: #{REDIS.url}\nnamespace: #{@namespace}\n")
    out, err, status = SolidJobsCommand.capture3({"SOLID_JOBS_REDIS_URL" => "redis://127.0.0.1:#{RedisServer.closed_port}/0"},
                                                 "archive", "reenqueue", "--all", "-C", file)
    assert status.success?, err
    assert_match(/\Asolid-jobs archive reenqueue \(all\): /, out)

    _, err, status = SolidJobsCommand.capture3({}, "archive", "reenqueue", "--all", "-C", write_file("a.yml", "nmespace: x\n"))
    assert_equal 64, status.exitstatus, err
    assert_match(/\Asolid-jobs archive: \S+a\.yml:1: unknown key "nmespace" \(did you mean "namespace"\?\)/, err)
  end

  # --- in-process: the file's shapes and messages ---------------------------

  def test_the_example_file_is_valid_in_each_of_its_environments
    applied = %w[development test production].to_h do |environment|
      SolidJobs.reset!
      SolidJobs::ConfigFile.new(EXAMPLE, environment: environment).apply
      c = SolidJobs.config
      [environment, [c.concurrency, c.namespace, c.channel_backends]]
    end
    assert_equal({"development" => [2, "myapp", {}], "test" => [1, "myapp_test", {}],
                  "production" => [16, "myapp", {"realtime" => :engine}]}, applied)
    assert_equal [["critical", 10], ["default", 5], ["low", 1]], SolidJobs.config.channels
    assert_equal({adapter: :solid_engine, url: "tcp://127.0.0.1:7700", lease: 30}, SolidJobs.config.backends[:engine])
    assert_raises(SolidJobs::ConfigurationError) { SolidJobs::ConfigFile.new(EXAMPLE, environment: "staging").apply }
  end

  # What an app's initializer calls so that its producers (a Rails server,
  # a console) enqueue where the workers the file configures look: the
  # same file, the same environment rule. SolidJobs::ConfigFile autoloads.
  def test_an_app_applies_the_same_file_with_config_file_apply
    dir = app_dir("production:\n  namespace: #{@namespace}_app\ndevelopment:\n  namespace: #{@namespace}_dev\n")
    ENV["RAILS_ENV"] = "production"
    applied = SolidJobs::ConfigFile.apply(app: dir)
    assert_equal [File.join(dir, "config", "solid_jobs.yml"), "production"], [applied.path, applied.environment]
    assert_equal "#{@namespace}_app", SolidJobs.config.namespace
    assert_nil SolidJobs::ConfigFile.apply(app: app_dir(nil)), "no file: nothing to apply"
    assert_equal "#{@namespace}_app", SolidJobs.config.namespace
  end

  def test_environment_comes_from_the_flag_then_rails_env_then_rack_env
    env = {"RAILS_ENV" => "production", "RACK_ENV" => "staging"}
    assert_equal "cli", SolidJobs::ConfigFile.environment("cli", env: env)
    assert_equal "production", SolidJobs::ConfigFile.environment(nil, env: env)
    assert_equal "staging", SolidJobs::ConfigFile.environment(nil, env: {"RACK_ENV" => "staging", "RAILS_ENV" => ""})
    assert_equal "development", SolidJobs::ConfigFile.environment(nil, env: {})
  end

  # Top-level keys < shared: < the environment's section; Sidekiq-style
  # `:key:` Symbols and `:thread` values read as names.
  def test_flat_keys_shared_section_and_symbols
    file = write_file("shapes.yml", <<~YAML)
      :concurrency: 4
      shutdown_timeout: 7
      shared:
        concurrency: 5
        execution_mode: :thread
      production:
        :channels:
          - :critical
    YAML
    SolidJobs::ConfigFile.new(file, environment: "production").apply
    c = SolidJobs.config
    assert_equal [5, 7, :thread, [["critical", 1]]], [c.concurrency, c.shutdown_timeout, c.execution_mode, c.channels]

    flat = write_file("flat.yml", "concurrency: 6\n")
    SolidJobs::ConfigFile.new(flat, environment: "anything").apply
    assert_equal 6, SolidJobs.config.concurrency, "a file without sections applies in every environment"
  end

  def test_a_bad_file_changes_nothing
    before = SolidJobs.config
    file = write_file("half.yml", "concurrency: 3\nchannels: [ok]\nread_timeout: -1\n")
    error = assert_raises(SolidJobs::ConfigurationError) { SolidJobs::ConfigFile.new(file, environment: "x").apply }
    assert_equal "#{file}:3: invalid read_timeout -1: expected a positive number of seconds", error.message
    assert_same before, SolidJobs.config
    assert_equal 2, SolidJobs.config.concurrency
  end

  def test_messages_name_the_line_where_an_inherited_key_is_written
    file = write_file("anchors.yml", <<~YAML)
      base: &base
        concurrency: 2
        channel_order: sideways
      production:
        <<: *base
    YAML
    error = assert_raises(SolidJobs::ConfigurationError) { SolidJobs::ConfigFile.new(file, environment: "production").apply }
    assert_equal "#{file}:3: invalid channel_order \"sideways\": expected one of weighted, priority, shuffle", error.message

    erb = write_file("erb.yml", "concurrency: 2\n\nchannels: <%= no_such_helper %>\n")
    error = assert_raises(SolidJobs::ConfigurationError) { SolidJobs::ConfigFile.new(erb, environment: "x").apply }
    # Ruby 3.4 quotes the name 'like this', earlier Rubies `like this'.
    assert_match(/\A#{Regexp.escape(erb)}:3: ERB failed: NameError: undefined local variable or method [`']no_such_helper'/,
                 error.message)
  end

  def test_unknown_keys_and_bad_shapes_are_named
    {
      "timeout: 3\n" => /:1: unknown key "timeout" \(known keys: concurrency, thread_concurrency, /,
      "backendz:\n  e: {adapter: solid_engine}\n" => /:1: unknown key "backendz" \(did you mean "backend"\?\)/,
      "channels:\n  - {name: a, wieght: 2}\n" =>
        /:1: invalid channel #{Regexp.escape({"name" => "a", "wieght" => 2}.inspect)}: expected \{name: NAME, weight: N\}/,
      "backends:\n  e:\n    adapter: solid_engine\n    url: tcp://127.0.0.1:1\n    leas: 3\n" =>
        /:1: unknown key\(s\) :leas in backends\[:e\].*did you mean :lease\?/,
      "channel_order: 5\n" => /:1: invalid channel_order 5: expected one of weighted, priority, shuffle\z/,
      "- concurrency\n" => /: expected a map of settings or of environment sections, got Array\z/
    }.each do |yaml, pattern|
      file = write_file("bad.yml", yaml)
      error = assert_raises(SolidJobs::ConfigurationError, yaml) { SolidJobs::ConfigFile.new(file, environment: "e").apply }
      assert_match pattern, error.message, yaml
      assert error.message.start_with?(file), error.message
    end
  end

  def test_a_backend_password_from_erb_never_appears_in_an_error
    ENV["SOLID_JOBS_TEST_SECRET"] = SECRET
    {
      <<~YAML => /secret\.yml:1: invalid backends\[:engine\]\[:lease\] "forever"/,
        backends:
          engine:
            adapter: solid_engine
            url: tcp://127.0.0.1:1
            password: <%= ENV["SOLID_JOBS_TEST_SECRET"] %>
            lease: forever
      YAML
      "url: tcp://user:<%= ENV['SOLID_JOBS_TEST_SECRET'] %>@127.0.0.1:notaport\n" =>
        %r{secret\.yml:1: invalid url "tcp://user:\*\*\*@127\.0\.0\.1:notaport"}
    }.each do |yaml, pattern|
      file = write_file("secret.yml", yaml)
      error = assert_raises(SolidJobs::ConfigurationError) { SolidJobs::ConfigFile.new(file, environment: "x").apply }
      assert_match pattern, error.message
      refute_includes error.message, SECRET
    end
  ensure
    ENV.delete("SOLID_JOBS_TEST_SECRET")
  end

  def test_every_key_is_a_configuration_setter_logging_included
    assert_includes SolidJobs::ConfigFile::KEYS, "log_level"
    assert_includes SolidJobs::ConfigFile::KEYS, "log_format"
    missing = SolidJobs::ConfigFile::KEYS.keys.reject { |k| SolidJobs::Configuration.method_defined?(:"#{k}=") }
    assert_empty missing, "every key is a Configuration setter"
    file = write_file("logging.yml", "log_level: debug\nlog_format: json\n")
    SolidJobs::ConfigFile.new(file, environment: "e").apply
    assert_equal %i[debug json], [SolidJobs.config.log_level, SolidJobs.config.log_format]
  ensure
    SolidJobs::Log.level = :none
  end

  private

  def write_file(name, text)
    path = File.join(@ledger_dir, name)
    FileUtils.mkdir_p(File.dirname(path))
    File.write(path, text)
    path
  end

  # An app directory: config/environment.rb loading the test app (and
  # `app_code`), and config/solid_jobs.yml holding `yaml` unless nil.
  def app_dir(yaml, app_code: nil)
    dir = Dir.mktmpdir("app", @ledger_dir)
    write_file(File.join(File.basename(dir), "config", "environment.rb"),
               "require #{WorkerProcess::APP.inspect}\n#{app_code}\n")
    write_file(File.join(File.basename(dir), "config", "solid_jobs.yml"), yaml) if yaml
    dir
  end

  def start_worker(*args, app: WorkerProcess::APP, env: {}, chdir: ROOT)
    log = ledger_path("worker-#{@workers.size}.log")
    worker = WorkerProcess.new(redis_url: REDIS.url, namespace: @namespace, log: log, args: args, env: env, app: app,
                               chdir: chdir).start
    @workers << worker
    worker
  end

  # What the running node registered in Redis (Nodes), read once it logged
  # its start.
  def running_description(worker)
    eventually("the worker started") do
      flunk("the worker exited:\n#{File.read(worker.log)}") unless worker.running?
      File.read(worker.log).include?(" started: ")
    end
    eventually("the node registered") { SolidJobs::Nodes.new.find { |n| n.description&.fetch("pid") == worker.pid } }
      .description
  end

  def run_cli(*args, env: {})
    SolidJobsCommand.capture3({"SOLID_JOBS_TEST_NAMESPACE" => @namespace, **env}, *args)
  end
end
