# frozen_string_literal: true

require_relative "test_helper"
require "open3"

# `solid-jobs web` as a real process: it serves the dashboard on the port it
# reports, with the safe headers, basic auth when asked, and stops on TERM.
class WebCLITest < SolidJobsTest
  def start_server(args: [], env: {})
    @server = WebServerProcess.new(redis_url: REDIS.url, namespace: @namespace, log: File.join(@ledger_dir, "web.log"),
                                   args: args, env: env).start
  end

  def teardown
    @server&.stop
    super
  end

  def test_serves_the_dashboard_and_stops_on_term
    LedgerTask.enqueue(ledger_path, "cli-web")
    start_server
    assert_match(/namespace #{@namespace}, read-only/, @server.output)
    response = @server.get("/redis")
    assert_equal "200", response.code
    assert_equal "DENY", response["x-frame-options"]
    assert_match(/default-src 'none'/, response["content-security-policy"])
    assert_includes response.body, %(<span class="ok">yes</span>), "it reaches the Redis it was given"
    assert_includes response.body, "namespace #{@namespace}"
    channels = @server.get("/channels")
    assert_match(%r{<code>default</code></td><td><code>redis</code></td><td class="num">1</td>}, channels.body,
                 "the job waiting in this namespace")
    assert_equal "200", @server.get("/nodes.json").code
    assert_equal "404", @server.get("/nowhere").code
    status = @server.stop
    assert status&.success?, "exit status after TERM: #{status.inspect}\n#{@server.output}"
  end

  def test_basic_auth_from_the_environment
    start_server(env: {"SOLID_JOBS_WEB_AUTH" => "ops:pa:ss"})
    assert_match(/basic auth/, @server.output)
    assert_equal "401", @server.get("/").code
    assert_equal "401", @server.get("/", user: "ops", password: "nope").code
    assert_equal "200", @server.get("/", user: "ops", password: "pa:ss").code
  end

  def test_bad_flags_exit_non_zero_with_a_message
    {
      %w[--port many] => /invalid argument: --port many/,
      %w[--port 70000] => /invalid port 70000/,
      %w[--basic-auth nopassword] => /basic auth must be USER:PASSWORD/,
      %w[--refresh -1] => /invalid refresh -1/,
      %w[--bogus] => /invalid option: --bogus/,
      %w[--require ./no/such/file] => /no such file/,
      %w[extra] => /unexpected argument/
    }.each do |args, pattern|
      out, err, status = Open3.capture3(RbConfig.ruby, WebServerProcess::EXE, "web", *args)
      assert_equal 64, status.exitstatus, "#{args.join(" ")}: #{err}"
      assert_match pattern, err, args.join(" ")
      assert_empty out
    end
  end

  # SolidJobs::Web loads when first named (a Rails route), never before.
  def test_the_dashboard_loads_when_named
    script = <<~RUBY
      require "solid_jobs"
      abort "loaded early" if $LOADED_FEATURES.any? { |f| f.include?("solid_jobs/web") }
      status, headers, = SolidJobs::Web.call("REQUEST_METHOD" => "GET", "PATH_INFO" => "/nope", "SCRIPT_NAME" => "/jobs")
      puts [status, headers["x-frame-options"]].join(" ")
    RUBY
    out, err, status = Open3.capture3(RbConfig.ruby, "-I", File.join(ROOT, "lib"), "-e", script)
    assert status.success?, err
    assert_equal "404 DENY\n", out
  end

  def test_help
    out, _, status = Open3.capture3(RbConfig.ruby, WebServerProcess::EXE, "web", "--help")
    assert status.success?
    assert_match(/Usage: solid-jobs web/, out)
    %w[--port --bind --redis-url --namespace --basic-auth].each { |flag| assert_includes out, flag }
    out, = Open3.capture3(RbConfig.ruby, WebServerProcess::EXE, "--help")
    assert_match(/solid-jobs web \[options\]/, out)
  end
end
