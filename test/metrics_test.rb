# frozen_string_literal: true

require_relative "test_helper"
require_relative "support/metrics_tasks"
require "open3"
require_relative "support/fault_proxy"
require "solid_jobs/web"

# /metrics as Prometheus reads it: a real worker (`bundle exec solid-jobs`)
# runs jobs that succeed, fail, retry and are given up, against a real
# Redis; the exposition is read through the Rack app and through
# `solid-jobs web`, and parsed by Prometheus' own Python client
# (prometheus_client, installed by bin/setup), never by our own code.
class MetricsTest < SolidJobsTest
  APP = File.join(ROOT, "test", "support", "metrics_app.rb")
  PARSER = File.join(ROOT, "test", "support", "prometheus_parse.py")
  CONCURRENCY = 2

  def teardown
    @worker&.stop
    @web&.stop
    @proxy&.close
    super
  end

  # The first Python that has prometheus_client: pyenv's `python3` may
  # shadow Debian's, which bin/setup gives the package.
  def python
    @python ||= %w[python3 /usr/bin/python3].find do |py|
      system(py, "-c", "import prometheus_client", out: File::NULL, err: File::NULL)
    end || flunk("no python3 with prometheus_client: run bin/setup (python3-prometheus-client)")
  end

  # {family name => {"type", "help", "samples" => [{"name", "labels", "value"}]}}
  def parse(text)
    out, err, status = Open3.capture3(python, PARSER, stdin_data: text)
    assert status.success?, "prometheus_client refused the exposition: #{err}\n#{text}"
    JSON.parse(out).to_h { |f| [f["name"], f] }
  end

  def rack_get(path = "/metrics")
    SolidJobs::Web.new.call("REQUEST_METHOD" => "GET", "PATH_INFO" => path, "SCRIPT_NAME" => "")
  end

  def scrape
    status, headers, body = rack_get
    assert_equal 200, status
    assert_equal "text/plain; version=0.0.4; charset=utf-8", headers["content-type"]
    parse(body.join)
  end

  def value(families, family, name: family, **labels)
    sample = families.fetch(family)["samples"].find do |s|
      s["name"] == name && labels.all? { |k, v| s["labels"][k.to_s] == v }
    end
    sample && sample["value"]
  end

  def test_a_real_worker_s_jobs_parsed_by_prometheus_client_through_rack_and_solid_jobs_web
    # Waiting on a channel no worker serves: its depth is what /metrics says.
    3.times { |i| CriticalTask.enqueue(ledger_path("critical"), "waiting-#{i}") }
    SolidJobs::Channels.pause("critical")
    @worker = WorkerProcess.new(redis_url: REDIS.url, namespace: @namespace, log: File.join(@ledger_dir, "worker.log"),
                                app: APP, args: ["--concurrency", CONCURRENCY.to_s],
                                env: {"SOLID_JOBS_TEST_OBSERVATION_INTERVAL" => "0.5"}).start
    5.times { |i| LedgerTask.enqueue(ledger_path, "ok-#{i}") }
    MetricsFlakyTask.enqueue(ledger_path("flaky"), "flaky")
    MetricsDoomedTask.enqueue(ledger_path("doomed"), "doomed")
    # 5 + 1 successes (the flaky one's second attempt); 2 failures (flaky's
    # first, doomed); 1 retry; 1 given up. 8 attempts, each started and
    # timed.
    eventually("every job settled") do
      ledger_lines.size == 5 && ledger_lines("flaky").include?("done flaky") && redis.zcard(key("archive")) == 1
    end
    families = eventually("the node's observations carry all 8 attempts", timeout: 30) do
      f = scrape
      f if value(f, "solid_jobs_job_duration_seconds", name: "solid_jobs_job_duration_seconds_count") == 8 &&
           value(f, "solid_jobs_jobs_processed", name: "solid_jobs_jobs_processed_total") == 6
    end
    node_id = @worker.node_id(redis)
    refute_nil node_id

    assert_equal 1, value(families, "solid_jobs_up")
    {"processed" => 6, "failed" => 2, "retried" => 1, "dead" => 1}.each do |name, expected|
      family = "solid_jobs_jobs_#{name}"
      assert_equal "counter", families.fetch(family)["type"], family
      assert_equal expected, value(families, family, name: "#{family}_total"), family
    end
    assert_equal 3, value(families, "solid_jobs_channel_ready_jobs", channel: "critical")
    assert_equal 0, value(families, "solid_jobs_channel_ready_jobs", channel: "default")
    age = value(families, "solid_jobs_channel_oldest_job_age_seconds", channel: "critical")
    assert_operator age, :>, 0
    assert_operator age, :<, 120
    assert_equal 0, value(families, "solid_jobs_channel_oldest_job_age_seconds", channel: "default")
    assert_equal 1, value(families, "solid_jobs_channel_paused", channel: "critical")
    assert_equal 0, value(families, "solid_jobs_channel_paused", channel: "default")
    assert_equal 0, value(families, "solid_jobs_planned_jobs")
    assert_equal 0, value(families, "solid_jobs_retrying_jobs")
    assert_equal 1, value(families, "solid_jobs_archived_jobs")

    assert_equal 1, value(families, "solid_jobs_node_up", node_id: node_id)
    busy = value(families, "solid_jobs_node_workers", node_id: node_id, state: "busy")
    idle = value(families, "solid_jobs_node_workers", node_id: node_id, state: "idle")
    assert_equal CONCURRENCY, busy + idle, "every worker is busy or idle"
    heartbeat = value(families, "solid_jobs_node_heartbeat_age_seconds", node_id: node_id)
    assert_operator heartbeat, :>=, 0
    assert_operator heartbeat, :<=, 2, "within recovery_delay (2 s in the test app)"
    assert_operator value(families, "solid_jobs_node_resident_memory_bytes", node_id: node_id), :>, 10 * 1024 * 1024

    %w[latency duration].each do |part|
      name = "solid_jobs_job_#{part}_seconds"
      assert_equal "histogram", families.fetch(name)["type"]
      assert_histogram(families.fetch(name)["samples"], name, node_id, count: 8)
    end
    families.each_value { |f| refute_empty f["help"].to_s, "#{f["name"]} has HELP" }
    assert_promtool_accepts(rack_get[2].join)

    # The same namespace through `solid-jobs web`, as a scraper reaches it.
    @web = WebServerProcess.new(redis_url: REDIS.url, namespace: @namespace, log: File.join(@ledger_dir, "web.log")).start
    response = @web.get("/metrics")
    assert_equal "200", response.code
    assert_equal "text/plain; version=0.0.4; charset=utf-8", response["content-type"]
    from_web = parse(response.body)
    assert_equal 6, value(from_web, "solid_jobs_jobs_processed", name: "solid_jobs_jobs_processed_total")
    assert_equal 3, value(from_web, "solid_jobs_channel_ready_jobs", channel: "critical")
    latency = value(from_web, "solid_jobs_job_latency_seconds", name: "solid_jobs_job_latency_seconds_count", node_id: node_id)
    assert_equal 8, latency
    refute_match(/ok-0|flaky|doomed|on purpose|#{Regexp.escape(@ledger_dir)}/, response.body,
                 "no job arguments or error messages")
  end

  # Prometheus' own linter (Debian's prometheus package, bin/setup): the
  # format, and the naming conventions (_total on counters, base units,
  # no _count on gauges...).
  def assert_promtool_accepts(text)
    promtool = ["promtool", "/usr/bin/promtool"].find { |p| system(p, "--version", out: File::NULL, err: File::NULL) }
    flunk("promtool not found: run bin/setup (prometheus)") unless promtool
    out, status = Open3.capture2e(promtool, "check", "metrics", stdin_data: text)
    assert status.success? && out.strip.empty?, "promtool check metrics: #{out}"
  end

  # Buckets are cumulative (never decreasing with le), end at +Inf, and
  # +Inf equals _count.
  def assert_histogram(samples, name, node_id, count:)
    mine = samples.select { |s| s["labels"]["node_id"] == node_id }
    buckets = mine.select { |s| s["name"] == "#{name}_bucket" }
    les = buckets.map { |s| s["labels"]["le"] }
    assert_equal "+Inf", les.last
    finite = les[0...-1].map { |le| Float(le) }
    assert_equal finite.sort, finite, "le ascending"
    counts = buckets.map { |s| s["value"] }
    assert_equal counts.sort, counts, "#{name}: cumulative buckets never decrease: #{counts}"
    total = mine.find { |s| s["name"] == "#{name}_count" }["value"]
    assert_equal count, total
    assert_equal total, counts.last, "+Inf bucket equals _count"
    assert_operator mine.find { |s| s["name"] == "#{name}_sum" }["value"], :>=, 0
  end

  # Label values are escaped as the format requires: the parser reads back
  # exactly the name Redis holds.
  # Issue 18 item 16: a node whose channels are all on SolidEngine writes
  # nothing to Redis; its series come from its announcements to the engine,
  # its channels' from the engine, and solid_jobs_engine_up says whether
  # the engine answered (a stopped one costs only its own series).
  def test_an_engine_only_node_and_its_channels_have_series
    engine = EngineServer.new.start
    configure_solid_jobs(backend: :solid_engine, url: engine.url, read_timeout: 0.5, connect_timeout: 0.5,
                         backends: {solid_engine: {adapter: :solid_engine, url: engine.url}})
    @worker = WorkerProcess.new(redis_url: REDIS.url, namespace: @namespace, log: File.join(@ledger_dir, "worker.log"),
                                args: ["--concurrency", CONCURRENCY.to_s],
                                env: {"SOLID_JOBS_TEST_ENGINE_URL" => engine.url,
                                      "SOLID_JOBS_TEST_OBSERVATION_INTERVAL" => "0.5"}).start
    node_id = eventually("the node announced its observation, every worker registered") do
      entry = SolidJobs.routing.backend_for("default").client.call(["NODES"]).first
      observed = entry && JSON.parse(entry[3])["observed"]
      entry[0] if observed && observed["workers"].values.sum == CONCURRENCY
    end
    LedgerTask.enqueue_after(60, ledger_path, "later")
    families = scrape
    assert_equal 1, value(families, "solid_jobs_engine_up", backend: "solid_engine")
    assert_equal 1, value(families, "solid_jobs_node_up", node_id: node_id)
    assert_equal CONCURRENCY, %w[busy idle].sum { |s| value(families, "solid_jobs_node_workers", node_id: node_id, state: s) }
    assert_operator value(families, "solid_jobs_node_heartbeat_age_seconds", node_id: node_id), :<, 2
    assert_operator value(families, "solid_jobs_node_resident_memory_bytes", node_id: node_id), :>, 1_000_000
    assert_equal 0, value(families, "solid_jobs_channel_ready_jobs", channel: "default"), "the scheduled job is not ready"
    assert_empty redis.keys(key("*")), "nothing of it is in Redis"

    # A hung engine (each of its reads times out after 0.5 s, Redis' whole
    # budget) costs only its own series: Redis is still read in full.
    engine.pause
    families = scrape
    assert_equal 0, value(families, "solid_jobs_engine_up", backend: "solid_engine")
    assert_nil value(families, "solid_jobs_node_up", node_id: node_id)
    assert_nil value(families, "solid_jobs_channel_ready_jobs", channel: "default"), "unknown, not 0"
    assert_equal 1, value(families, "solid_jobs_up"), "Redis was read"
    refute_nil value(families, "solid_jobs_jobs_processed", name: "solid_jobs_jobs_processed_total"), "and its counters are there"
    engine.resume
  ensure
    @worker&.kill!
    engine&.cleanup
  end

  def test_label_values_are_escaped
    odd = %(a "quoted" back\\slash)
    redis.sadd(key("channels"), odd)
    redis.lpush(key("channel:#{odd}"), "{not json")
    families = scrape
    assert_equal 1, value(families, "solid_jobs_channel_ready_jobs", channel: odd)
    assert_nil value(families, "solid_jobs_channel_oldest_job_age_seconds", channel: odd),
               "an undecodable head has no age (not a made-up one)"
  end

  def test_read_only_and_behind_basic_auth_like_every_page
    status, headers, = SolidJobs::Web.new.call("REQUEST_METHOD" => "POST", "PATH_INFO" => "/metrics")
    assert_equal 405, status
    assert_equal "GET, HEAD", headers["allow"]
    web = SolidJobs::Web.new(basic_auth: %w[ops secret])
    assert_equal 401, web.call("REQUEST_METHOD" => "GET", "PATH_INFO" => "/metrics").first
    auth = "Basic #{["ops:secret"].pack("m0")}"
    assert_equal 200, web.call("REQUEST_METHOD" => "GET", "PATH_INFO" => "/metrics", "HTTP_AUTHORIZATION" => auth).first
    status, _, body = SolidJobs::Web.new.call("REQUEST_METHOD" => "HEAD", "PATH_INFO" => "/metrics/")
    assert_equal [200, []], [status, body]
  end

  # A hung Redis (a black hole: connections accepted, nothing answered)
  # costs one read timeout, not one per read, and the scrape still answers
  # with solid_jobs_up 0, which Prometheus can alert on.
  def test_a_hung_redis_scrape_returns_up_0_within_one_read_timeout
    @proxy = FaultProxy.new(REDIS.port).start
    configure_solid_jobs(redis_url: @proxy.url, read_timeout: 1, connect_timeout: 1)
    assert_equal 1, value(scrape, "solid_jobs_up"), "through the proxy before the fault"
    @proxy.blackhole = true
    started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    families = scrape
    elapsed = Process.clock_gettime(Process::CLOCK_MONOTONIC) - started
    assert_operator elapsed, :<, 1 + 1.5, "one read timeout (1 s) and a margin, not one per read"
    assert_equal 0, value(families, "solid_jobs_up")
    refute families.key?("solid_jobs_jobs_processed"), "nothing made up for what could not be read"
  end

  # A Redis that answers, slowly (0.6 s a command here), would cost a
  # timeout's worth per read; once the scrape has spent a read timeout it
  # reads no more, and says so with solid_jobs_up 0.
  def test_a_slow_redis_scrape_stops_reading_after_one_read_timeout
    @proxy = FaultProxy.new(REDIS.port).start
    configure_solid_jobs(redis_url: @proxy.url, read_timeout: 1, connect_timeout: 1)
    @proxy.delay = 0.3
    started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    families = scrape
    elapsed = Process.clock_gettime(Process::CLOCK_MONOTONIC) - started
    # What it read proves the budget (below); the time only bounds a hang.
    # A bound of budget + read in flight + 1 s failed at 4.0 s and 6.3 s
    # with both cores busy: the proxy's delays ran late, not the scrape.
    assert_operator elapsed, :<, 15, "a scrape of a slow Redis is bounded"
    assert_equal 0, value(families, "solid_jobs_up")
    assert_equal 0, value(families, "solid_jobs_channel_ready_jobs", channel: "default"), "read before the budget ran out"
    refute families.key?("solid_jobs_node_up"), "not read once it had"
  end

  def test_a_stopped_redis_scrape_returns_up_0_and_no_secret
    configure_solid_jobs(redis_url: "redis://:hunter2@127.0.0.1:#{RedisServer.closed_port}/0", connect_timeout: 1)
    status, _, body = rack_get
    assert_equal 200, status
    assert_equal 0, value(parse(body.join), "solid_jobs_up")
    refute_includes body.join, "hunter2"
  end
end
