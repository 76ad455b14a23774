# frozen_string_literal: true

require_relative "test_helper"
require_relative "support/archive_tasks"
require "rack/test"
require "rack/lint"
require "solid_jobs/web"

# A worker whose channels are all on a real solid-engine-server writes
# nothing to Redis: it still appears in SolidJobs::Nodes and on the
# dashboard (it announces itself to the engine every heartbeat), the
# engine's dead jobs are on the Archive page, and its jobs are found by id.
class WebEngineTest < SolidJobsTest
  include Rack::Test::Methods

  SENTINEL = "ARGUMENT-SENTINEL-e51d"
  APP = File.join(__dir__, "support", "archive_app.rb")

  def app = Rack::Lint.new(SolidJobs::Web.new(refresh: nil))

  def setup
    super
    @engine = EngineServer.new.start
    configure_solid_jobs(backend: :solid_engine, url: @engine.url,
                         backends: {solid_engine: {adapter: :solid_engine, url: @engine.url, lease: 30.0}})
  end

  def teardown
    @worker&.stop
    @engine&.stop
    super
  end

  def start_worker
    @worker = WorkerProcess.new(redis_url: REDIS.url, namespace: @namespace, log: File.join(@ledger_dir, "worker.log"),
                                app: APP, env: {"SOLID_JOBS_TEST_ENGINE_URL" => @engine.url},
                                args: ["--shutdown-timeout", "1"]).start
  end

  def engine_client = SolidJobs.routing.backend_for("default").client

  def json(path)
    get path
    assert_equal 200, last_response.status, path
    JSON.parse(last_response.body)
  end

  def test_an_engine_only_node_is_listed_until_it_stops
    start_worker
    node = eventually("the node announced itself") do
      engine_client.call(["NODES"]).find { |_, _, _, description| JSON.parse(description)["pid"] == @worker.pid }
    end
    node_id, age_ms, ttl_ms, = node
    # When the announcement just read would have expired, had no other followed.
    expires = Process.clock_gettime(Process::CLOCK_MONOTONIC) - (age_ms / 1000.0) + (ttl_ms / 1000.0)
    assert_operator age_ms, :<, 2000
    assert_equal 2000, ttl_ms, "it lives the recovery delay"
    assert_empty redis.keys(key("*")), "the node wrote nothing to Redis"

    listed = SolidJobs::Nodes.new.to_a
    assert_equal [node_id], listed.map(&:id)
    assert_kind_of SolidJobs::Nodes::EngineNode, listed.first
    assert listed.first.alive?
    assert_equal @worker.pid, listed.first.description["pid"]
    assert_equal "solid_engine", listed.first.to_h["backend"]
    assert_raises(SolidJobs::Backends::NotSupported) { listed.first.request_control(:pause) }

    page = json("/nodes.json")
    assert_equal [node_id], page["engine_nodes"].map { |n| n["node_id"] }
    assert_equal "solid_engine", page["engines"].first["name"]
    assert_operator page["engines"].first.dig("stats", "connections"), :>=, 1, "the worker is connected"
    get "/nodes"
    html = last_response.body
    assert_includes html, %(data-node-id="#{node_id}")
    assert_includes html, "SolidEngine only"
    assert_includes html, ":#{@worker.pid}</code>"
    assert_includes html, "<h2>SolidEngine servers</h2>"
    refute_includes html, "No live node"
    # Item 16: its latest observation in short travels with the
    # announcement (it writes nothing to Redis).
    # (The first observation may come before every worker registered.)
    concurrency = listed.first.description["concurrency"]
    observed = eventually("an announcement with every worker counted") do
      entry = engine_client.call(["NODES"]).find { |id, *| id == node_id }
      seen = JSON.parse(entry[3])["observed"]
      seen if seen && seen["workers"].values.sum == concurrency
    end
    assert_equal "running", observed["state"]
    assert_operator observed.dig("process", "rss_bytes"), :>, 1_000_000
    assert_operator observed["age_ms"], :<, 10_000
    get "/nodes"
    assert_match %r{<dt>Memory \(RSS\)</dt><dd>[\d.]+ MiB</dd>}, last_response.body
    assert_match(%r{<dt>Workers</dt><dd>#{concurrency} \(\w+\): \d+ \w+}, last_response.body)
    assert_equal 1, json("/overview.json")["engine_only_nodes"]
    get "/"
    assert_includes last_response.body, %(<div class="label">SolidEngine-only nodes</div><div class="value">1</div>)

    # It keeps announcing (every heartbeat, 0.5 s here): listed at every
    # look, and still after the TTL of that first announcement (a TTL on
    # the engine's clock: only time passing shows it; 0.5 s of margin).
    eventually("listed past the TTL of its first announcement") do
      assert_equal [node_id], engine_client.call(["NODES"]).map(&:first)
      Process.clock_gettime(Process::CLOCK_MONOTONIC) > expires + 0.5
    end
    assert @worker.stop&.success?
    assert_empty engine_client.call(["NODES"]), "a clean stop withdraws the node"
    assert_empty SolidJobs::Nodes.new.to_a
  end

  # The engine stores what the worker sent with FAIL, message included:
  # only the reason and the class come out, whatever the message holds.
  def test_engine_dead_reasons_are_cut_before_the_message
    client = Object.new
    rows = [["a", 1, 2, "failed 2 time(s), reaching max_failures 2 (Billing::Declined: card (Visa: 4242) #{SENTINEL})", ""],
            ["b", 1, 1, "archived (-: #{SENTINEL})", ""],
            ["c", 1, 1, "#{SENTINEL} without the worker's shape", ""]]
    client.define_singleton_method(:call) { |args| args.first == "DEAD" ? rows : raise(ArgumentError) }
    backend = Struct.new(:name, :client).new(:engine, client)
    dead = SolidJobs::Console.new.engine_dead(backend)
    expected = [["a", "failed 2 time(s), reaching max_failures 2", "Billing::Declined"], ["b", "archived", nil],
                ["c", nil, nil]]
    assert_equal expected, dead.map { |r| [r["id"], r["reason"], r["error_class"]] }
    refute_includes dead.inspect, SENTINEL
    assert_equal ["a"], SolidJobs::Console.new.engine_dead(backend, error_class: "Billing::Declined").map { |r| r["id"] }
  end

  # Issue 18 item 16: the Channels page (and its JSON) counts what the
  # engine holds of each channel.
  def test_the_channels_page_reads_the_engine
    2.times { |i| LedgerTask.enqueue(ledger_path, "e#{i}") }
    LedgerTask.enqueue_after(60, ledger_path, "later")
    row = json("/channels.json")["channels"].find { |c| c["name"] == "default" }
    assert_equal ["solid_engine", 2, 1, 0, 0], row.values_at("backend", "depth", "scheduled", "reserved", "dead")
    get "/channels"
    cells = %r{<td><code>default</code></td><td><code>solid_engine</code>\ <span\ class="muted">
               SolidEngine\ \#\d+:\ 1\ scheduled,\ 0\ reserved,\ 0\ dead</span></td><td\ class="num">2</td>}x
    assert_match cells, last_response.body
  end

  # An announcement is whatever a client with the password sent: values of
  # the wrong shape are left out, and neither /nodes nor /metrics fails.
  def test_an_announcement_of_the_wrong_shape_breaks_no_page
    odd = {"concurrency" => {}, "observed" => {"state" => [1], "workers" => {"running" => {}, "waiting" => 2},
                                               "process" => {"rss_bytes" => [1], "cpu_seconds" => "x"}, "age_ms" => "y"}}
    assert_equal "OK", engine_client.call(["NODE", "odd-node", "60000", JSON.generate(odd)])
    get "/nodes"
    assert_equal 200, last_response.status
    assert_includes last_response.body, %(data-node-id="odd-node")
    status, _, body = SolidJobs::Web.new.call("REQUEST_METHOD" => "GET", "PATH_INFO" => "/metrics", "SCRIPT_NAME" => "")
    assert_equal 200, status
    text = body.join
    assert_includes text, %(solid_jobs_node_workers{node_id="odd-node",state="idle"} 2)
    refute_includes text, %(solid_jobs_node_resident_memory_bytes{node_id="odd-node")
  end

  # A hung engine costs a page its configured timeouts, no more, and the
  # page says what it could not read instead of showing no nodes.
  def test_a_hung_engine_is_shown_unavailable_within_the_timeouts
    configure_solid_jobs(backend: :solid_engine, url: @engine.url, read_timeout: 0.5, connect_timeout: 0.5,
                         backends: {solid_engine: {adapter: :solid_engine, url: @engine.url, lease: 30.0}})
    @engine.pause
    started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    get "/nodes"
    elapsed = Process.clock_gettime(Process::CLOCK_MONOTONIC) - started
    assert_equal 200, last_response.status
    assert_operator elapsed, :<, 5, "two reads of 0.5 s each, plus connecting"
    row = %r{<td><code>solid_engine</code></td><td><code>unix://[^<]+</code></td>
             <td\ class="num"><span\ class="unavailable"\ title="[^"]*timed\ out}x
    assert_match row, last_response.body
    assert_includes last_response.body, "the nodes of SolidEngine solid_engine are unavailable"
    refute_nil json("/overview.json").dig("engine_only_nodes", "unavailable"), "the count is unknown, not 0"
    get "/channels"
    assert_equal 200, last_response.status
    unavailable = %r{<td><code>default</code></td><td><code>solid_engine</code>
                     .*?<span\ class="unavailable"\ title="[^"]*timed\ out}mx
    assert_match unavailable, last_response.body, "the engine's channels are unavailable, not empty"
    nodes = SolidJobs::Nodes.new
    assert_empty nodes.to_a, "the Redis nodes (none here) are still listed"
    assert_match(/timed out/, nodes.unreachable.fetch("solid_engine"))
  ensure
    @engine.resume
  end

  def test_engine_dead_jobs_are_on_the_archive_page_and_jobs_are_found_by_id
    start_worker
    dead = DoomedTask.enqueue(SENTINEL)
    scheduled = LedgerTask.enqueue_after(3600, ledger_path, "later")
    backend = SolidJobs.routing.backend_for("default")
    eventually("the job is dead on the engine") { backend.get_job(dead)&.fetch("state") == "dead" }

    page = json("/archive.json")
    rows = page["engines"].first["dead"]
    assert_equal [dead], rows.map { |r| r["id"] }
    assert_equal({"task" => "DoomedTask", "channel" => "default", "error_class" => "ArgumentError", "attempts" => 1},
                 rows.first.slice("task", "channel", "error_class", "attempts"))
    assert_empty json("/archive.json?error_class=KeyError")["engines"].first["dead"]
    get "/archive"
    assert_includes last_response.body, %(<a href="/executions/#{dead}">)
    refute_includes last_response.body, SENTINEL
    refute_includes last_response.body, "doomed #{SENTINEL}", "the engine's reason carries the message: never shown"

    {dead => "dead", scheduled => "scheduled"}.each do |id, state|
      get "/search?q=#{id}"
      assert_equal 303, last_response.status, state
      assert_equal "/executions/#{id}", last_response.headers["location"]
      get "/executions/#{id}"
      assert_includes last_response.body, %(<span class="state #{state}">#{state}</span>)
      refute_includes last_response.body, SENTINEL
    end
  end
end
