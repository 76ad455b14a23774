# frozen_string_literal: true

require_relative "test_helper"
require_relative "support/fault_proxy"
require "rack/test"
require "rack/lint"
require "solid_jobs/web"

# The dashboard's /health: through Rack (Rack::Lint) with a node started
# in this process, and through `solid-jobs web` (a real server) with a real
# worker process, Redis reachable, refused and hung.
class WebHealthTest < SolidJobsTest
  include Rack::Test::Methods

  def setup
    super
    @web = SolidJobs::Web.new
    @proxies = []
  end

  def teardown
    @server&.stop
    if @worker
      @worker.signal("KILL")
      @worker.wait(timeout: 5)
    end
    @proxies.each(&:close)
    super
  end

  def app = Rack::Lint.new(@web)
  def body = JSON.parse(last_response.body)

  def test_no_node_is_unavailable_a_running_node_ok
    get "/health"
    assert_equal 503, last_response.status
    assert_equal "application/json; charset=utf-8", last_response.content_type
    assert_equal "unhealthy", body["status"]
    assert_equal "no live node", body["reason"]
    assert_equal [{"name" => "redis", "kind" => "redis", "reachable" => true}],
                 body["backends"].map { |b| b.except("latency_ms") }
    conductor = start_conductor
    get "/health.json"
    assert_equal 200, last_response.status, last_response.body
    assert_equal "ok", body["status"]
    node = body["nodes"]["list"].find { |n| n["id"] == conductor.node_id }
    assert node["live"] && node["fresh"], node.inspect
    assert_operator node["heartbeat_age_ms"], :<=, node["stale_after_ms"]
    assert_equal SolidJobs::Health.fresh_for_ms(500), node["stale_after_ms"], "two 0.5 s heartbeats and a second"
    head "/health"
    assert_equal 200, last_response.status
    assert_empty last_response.body
  end

  def test_redis_refused_is_503_without_its_password
    configure_solid_jobs(redis_url: "redis://:pa55word@127.0.0.1:1/0")
    get "/health"
    assert_equal 503, last_response.status
    refute_includes last_response.body, "pa55word"
    refute_includes last_response.body, "127.0.0.1:1", "nor the URL: /health may be public"
    assert_equal false, body["backends"].first["reachable"]
    assert_match(/ConnectionError/, body["backends"].first["error"])
  end

  def test_basic_auth_applies_unless_health_is_public
    guarded = Rack::MockRequest.new(Rack::Lint.new(SolidJobs::Web.new(basic_auth: %w[ops s3cret])))
    assert_equal 401, guarded.get("/health").status
    public = Rack::MockRequest.new(Rack::Lint.new(SolidJobs::Web.new(basic_auth: %w[ops s3cret], public_health: true)))
    assert_equal 503, public.get("/health").status, "answered without credentials"
    assert_equal 401, public.get("/").status, "only /health is public"
    assert_equal 401, public.get("/nodes.json").status
    assert_equal 405, public.post("/health").status, "still read-only"
  end

  def start_web(url, args: [])
    @server = WebServerProcess.new(redis_url: url, namespace: @namespace, log: File.join(@ledger_dir, "web.log"),
                                   args: args).start
  end

  def start_worker(url)
    @worker = WorkerProcess.new(redis_url: url, namespace: @namespace, log: File.join(@ledger_dir, "worker.log")).start
  end

  def health_status = [@server.get("/health").code, JSON.parse(@server.get("/health").body)]

  def test_solid_jobs_web_reports_a_worker_and_a_hung_redis_within_its_bound
    proxy = (@proxies << FaultProxy.new(REDIS.port).start).last
    start_web(proxy.url, args: %w[--basic-auth ops:pw --public-health])
    code, = health_status
    assert_equal "503", code
    start_worker(proxy.url)
    eventually("the worker's node is fresh") { health_status.first == "200" }
    assert_equal "401", @server.get("/nodes").code, "other pages keep their auth"
    proxy.blackhole = true
    started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    response = @server.get("/health")
    seconds = Process.clock_gettime(Process::CLOCK_MONOTONIC) - started
    assert_equal "503", response.code, response.body
    assert_operator seconds, :<, SolidJobs::Web::HealthEndpoint::TIMEOUT + 1.5, "bounded (#{seconds.round(2)}s)"
    backend = JSON.parse(response.body)["backends"].first
    assert_equal false, backend["reachable"]
    assert_match(/no answer|timed out/, backend["error"])
    proxy.blackhole = false
    eventually("healthy again once Redis answers") { health_status.first == "200" }
  ensure
    proxy&.blackhole = false
  end
end
