# frozen_string_literal: true

require_relative "test_helper"
require_relative "support/telemetry_fixture"
require "rack/test"
require "rack/lint"
require "solid_jobs/web"

# SolidJobs::Web through rack-test: every route, the headers, escaping,
# basic auth, and that job arguments never reach a page or its JSON.
class WebTest < SolidJobsTest
  # The Channels page's backend cell of a channel on Redis.
  ON_REDIS = "<td><code>redis</code></td>"

  include Rack::Test::Methods

  HTML_ROUTES = %w[/ /channels /executions /nodes /resources /redis /telemetry /recurring /flow /archive
                   /search?q=LedgerTask].freeze
  JSON_ROUTES = %w[/overview.json /channels.json /executions.json /nodes.json /resources.json /redis.json /telemetry.json
                   /recurring.json /flow.json /archive.json /search.json?q=LedgerTask].freeze
  SENTINEL = "ARGUMENT-SENTINEL-7f3a"
  HOSTILE = %(<script>alert("x")</script>)

  def setup
    super
    @web = SolidJobs::Web.new
    @fixture = TelemetryFixture.new(redis, @namespace)
  end

  def app = Rack::Lint.new(@web)

  def seed
    @node = @fixture.node(hostname: "worker-host")
    @fixture.intervals(@node, seconds: 20)
    @job = SecureRandom.uuid
    @fixture.lifecycle(@node, @job, task: "LedgerTask")
    @failed = SecureRandom.uuid
    @fixture.lifecycle(@node, @failed, task: "ImportCatalog", fail_with: ["RuntimeError", "app/tasks/import.rb:12"])
    LedgerTask.enqueue(ledger_path, SENTINEL)
    CriticalTask.enqueue(ledger_path, SENTINEL)
  end

  # A paused channel (SolidJobs::Channels) says so, with since and by
  # (escaped: `by` is whatever the operator typed); the others say claiming.
  def test_the_channels_page_shows_paused_channels
    seed
    SolidJobs::Channels.pause("critical", by: HOSTILE)
    get "/channels"
    escaped = "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;"
    state = %r{<code>critical</code></td>#{ON_REDIS}<td class="num">1</td><td class="num">[^<]*</td><td>(<span[^>]*>[^<]*</span>)}
    since = /paused since \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC by /
    assert_match(/\A<span class="stale" title="solid-jobs channel resume critical">#{since}/, last_response.body[state, 1])
    assert last_response.body[state, 1].end_with?("by #{escaped}</span>"), last_response.body[state, 1]
    refute_includes last_response.body, HOSTILE
    claiming = %(<span class="muted">claiming</span>)
    assert_match(%r{<code>default</code></td>#{ON_REDIS}<td class="num">1</td><td class="num">[^<]*</td><td>#{claiming}},
                 last_response.body)
    get "/channels.json"
    channels = JSON.parse(last_response.body)["channels"].to_h { |c| [c["name"], c] }
    assert_equal HOSTILE, channels.fetch("critical")["paused"]["by"]
    assert_kind_of Integer, channels.fetch("critical")["paused"]["paused_ms"]
    assert_nil channels.fetch("default")["paused"]
  end

  # A channel that used priorities shows its ready jobs per level.
  def test_the_channels_page_shows_ready_jobs_per_priority
    seed
    2.times { LedgerTask.set(priority: 1).enqueue(ledger_path, SENTINEL) }
    get "/channels"
    assert_match(%r{<code>default</code></td>#{ON_REDIS}<td class="num">3</td>.*?<td>1: 2 · 5: 1</td>}, last_response.body)
    assert_match(%r{<code>critical</code></td>#{ON_REDIS}(<td[^>]*>[^<]*</td>){2}<td><span[^>]*>claiming</span></td><td>—</td>},
                 last_response.body)
    get "/channels.json"
    channels = JSON.parse(last_response.body)["channels"].to_h { |c| [c["name"], c] }
    assert_equal({"1" => 2}, channels.fetch("default")["levels"])
    assert_nil channels.fetch("critical")["levels"]
  end

  def test_every_page_renders_with_data
    seed
    HTML_ROUTES.each do |path|
      get path
      assert_equal 200, last_response.status, path
      assert_equal "text/html; charset=utf-8", last_response.content_type, path
      assert_includes last_response.body, "<main", path
      refute_includes last_response.body, ">unavailable<span", path
    end
    get "/"
    assert_includes last_response.body, %(<div class="label">Completed, last minute</div><div class="value">400</div>)
    assert_includes last_response.body, %(<div class="label">Ready</div><div class="value">2</div>)
    assert_match(/<svg[^>]+class="chart"/, last_response.body)
    assert_match(/<path d="M[\d. ]+L/, last_response.body, "the throughput line is drawn")
    get "/channels"
    assert_match(%r{<code>critical</code></td>#{ON_REDIS}<td class="num">1</td>}, last_response.body)
    get "/nodes"
    assert_includes last_response.body, "worker-host:4242"
    assert_match(/class="state running"/, last_response.body)
    assert_includes last_response.body, %(href="/executions/11111111-2222-3333-4444-555555555555")
    get "/executions"
    assert_includes last_response.body, %(href="/executions/#{@job}")
    assert_match(%r{<code>RuntimeError</code> at <code>app/tasks/import.rb:12</code>}, last_response.body)
    get "/executions/#{@job}"
    assert_equal 200, last_response.status
    assert_includes last_response.body, "LedgerTask"
    assert_match(/<svg[^>]+class="chart timeline"/, last_response.body)
  end

  def test_every_json_route
    seed
    JSON_ROUTES.each do |path|
      get path
      assert_equal 200, last_response.status, path
      assert_equal "application/json; charset=utf-8", last_response.content_type, path
      JSON.parse(last_response.body)
    end
    get "/overview.json"
    series = JSON.parse(last_response.body).fetch("series")
    completed = series.fetch("completed_per_s")
    assert_equal 60, completed.size
    assert_nil completed.first, "a bucket no source reported is null, not 0"
    assert_in_delta 20.0, completed.compact.max, 0.01
    get "/executions/#{@job}.json"
    body = JSON.parse(last_response.body)
    assert_equal "completed", body.dig("journal", "state")
    assert_equal %w[enqueued reserved started completed], body["events"].map { |e| e["event"] }
  end

  def test_unknown_paths_and_jobs_are_not_found
    ["/nope", "/channels/x", "/executions/#{SecureRandom.uuid}", "/executions/%3Cx%3E", "/.json", "/nodes.html"].each do |path|
      get path
      assert_equal 404, last_response.status, path
      assert_safe_headers(path)
    end
    env = Rack::MockRequest.env_for("/")
    env["PATH_INFO"] = "/nope<script>"
    status, _, body = @web.call(env)
    assert_equal 404, status
    assert_includes body.join, "/nope&lt;script&gt;"
    refute_includes body.join, "/nope<script>"
  end

  def test_it_only_reads
    %w[POST PUT PATCH DELETE OPTIONS].each do |verb|
      request "/", method: verb
      assert_equal 405, last_response.status, verb
      assert_equal "GET, HEAD", last_response.headers["allow"]
      assert_safe_headers(verb)
    end
    head "/channels"
    assert_equal 200, last_response.status
    assert_empty last_response.body
    assert_operator last_response.headers["content-length"].to_i, :>, 0
  end

  def test_safe_headers_and_the_nonce
    (HTML_ROUTES + JSON_ROUTES).each do |path|
      get path
      assert_safe_headers(path)
    end
    get "/"
    csp = last_response.headers["content-security-policy"]
    nonce = csp[/script-src 'nonce-([^']+)'/, 1]
    assert nonce, csp
    assert_includes csp, "style-src 'nonce-#{nonce}'"
    assert_includes last_response.body, %(<style nonce="#{nonce}">)
    assert_includes last_response.body, %(<script nonce="#{nonce}">)
    refute_match(/<script(?![^>]*nonce="#{Regexp.escape(nonce)}")/, last_response.body, "no script without the nonce")
    refute_match(/ style="/, last_response.body, "no style attribute (the CSP would block it)")
    refute_match(%r{(src|href)="(https?:)?//}, last_response.body, "no external asset")
    get "/"
    refute_equal nonce, last_response.headers["content-security-policy"][/nonce-([^']+)/, 1], "a nonce per response"
  end

  def test_refresh_can_be_turned_off
    @web = SolidJobs::Web.new(refresh: 0)
    get "/"
    refute_includes last_response.body, "<script"
  end

  def test_links_respect_the_mount_point
    seed
    get "/executions", {}, "SCRIPT_NAME" => "/jobs"
    assert_includes last_response.body, %(href="/jobs/channels")
    assert_includes last_response.body, %(href="/jobs/executions/#{@job}")
    refute_match(%r{href="/(channels|nodes)"}, last_response.body)
  end

  def test_mounted_as_the_class_itself
    get "/channels"
    status, headers, = SolidJobs::Web.call(Rack::MockRequest.env_for("/channels"))
    assert_equal 200, status
    assert_equal "nosniff", headers["x-content-type-options"]
  end

  def test_hostile_values_are_escaped_everywhere
    node = @fixture.node(hostname: HOSTILE)
    job = SecureRandom.uuid
    @fixture.lifecycle(node, job, task: HOSTILE, fail_with: [HOSTILE, %(<img src=x onerror="alert(1)">)])
    @fixture.entry(node, "metrics.interval", {"completed" => 1, "interval_ms" => 1000})
    (HTML_ROUTES + ["/executions/#{job}"]).each do |path|
      get path
      refute_includes last_response.body, "<script>alert", path
      refute_includes last_response.body, "<img src=x", path
    end
    get "/executions/#{job}"
    assert_includes last_response.body, "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;"
    assert_includes last_response.body, "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;"
    get "/executions/#{job}.json"
    assert_equal HOSTILE, JSON.parse(last_response.body).dig("journal", "task"), "JSON carries the value as data"
  end

  def test_arguments_are_never_rendered
    seed
    jobs = [LedgerTask.enqueue(ledger_path, SENTINEL), SlowTask.enqueue(ledger_path, SENTINEL, 1),
            LedgerTask.enqueue_after(60, ledger_path, SENTINEL)]
    jobs.each { |id| @fixture.lifecycle(@node, id, task: "LedgerTask") }
    paths = HTML_ROUTES + JSON_ROUTES + jobs.flat_map { |id| ["/executions/#{id}", "/executions/#{id}.json"] }
    paths.each do |path|
      get path
      assert_equal 200, last_response.status, path
      refute_includes last_response.body, SENTINEL, "#{path} shows a job argument"
    end
  end

  # Real jobs run by a real node, in this process: their ids, tasks and
  # lifecycles appear; their arguments appear nowhere.
  def test_a_real_node_never_shows_arguments
    configure_solid_jobs(observation_interval: 0.5, channels: ["default"])
    done = Array.new(3) { LedgerTask.enqueue(ledger_path, SENTINEL) }
    archived = ImportCatalog.enqueue(ledger_path, SENTINEL, "archive")
    waiting = CriticalTask.enqueue(ledger_path, SENTINEL)
    start_conductor
    eventually("the jobs ran and were journaled") do
      get "/executions.json"
      states = JSON.parse(last_response.body)["executions"].to_h { |x| [x["id"], x["state"]] }
      done.all? { |id| %w[completed acknowledged].include?(states[id]) } && states[archived] == "dead"
    end
    eventually("the node observed its workers") do
      get "/nodes.json"
      JSON.parse(last_response.body)["nodes"].any? { |n| n["ractors"].is_a?(Array) && n["ractors"].size == 2 }
    end
    get "/executions/#{archived}"
    assert_includes last_response.body, "<dt>Error</dt><dd><code>RuntimeError</code>"
    assert_match(/State now.*archived/m, last_response.body)
    get "/executions/#{archived}.json"
    record = JSON.parse(last_response.body)["record"]
    assert_equal %w[ImportCatalog archived], record.values_at("task", "state")
    refute record.key?("backtrace"), "only the listed fields of a job record"
    paths = HTML_ROUTES + JSON_ROUTES +
            (done + [archived, waiting]).flat_map { |id| ["/executions/#{id}", "/executions/#{id}.json"] }
    paths.each do |path|
      get path
      assert_includes [200], last_response.status, path
      refute_includes last_response.body, SENTINEL, "#{path} shows a job argument"
    end
  end

  def test_basic_auth
    @web = SolidJobs::Web.new(basic_auth: %w[admin s3cret])
    get "/"
    assert_equal 401, last_response.status
    assert_equal %(Basic realm="SolidJobs", charset="UTF-8"), last_response.headers["www-authenticate"]
    assert_safe_headers("401")
    basic_authorize "admin", "wrong"
    get "/"
    assert_equal 401, last_response.status
    basic_authorize "admin", "s3cret"
    get "/"
    assert_equal 200, last_response.status
    get "/nodes.json"
    assert_equal 200, last_response.status
    header "Authorization", nil
    post "/"
    assert_equal 401, last_response.status, "no method is answered before authentication"
    assert_raises(ArgumentError) { SolidJobs::Web.new(basic_auth: ["admin", ""]) }
  end

  def test_redis_down_shows_unavailable_not_an_error
    configure_solid_jobs(redis_url: "redis://127.0.0.1:1/0")
    (HTML_ROUTES + JSON_ROUTES).each do |path|
      get path
      assert_equal 200, last_response.status, "#{path}: #{last_response.body[0, 300]}"
    end
    get "/redis"
    assert_includes last_response.body, %(<span class="bad">no</span>)
    get "/"
    assert_includes last_response.body, %(class="unavailable")
    refute_match(/<div class="value">0</, last_response.body, "no count is guessed as 0")
  end

  def test_missing_and_stale_observations
    @fixture.node(hostname: "old-host", at_ms: @fixture.now_ms - 45_000, process: false)
    get "/resources"
    assert_match(/old-host:4242.*?unavailable/m, last_response.body, "a process never observed is unavailable")
    get "/nodes"
    assert_match(/stale: 4\d(\.\d+)? s ago/, last_response.body)
  end

  def test_telemetry_gaps_and_freshness
    node = @fixture.node(dropped: 3, state: "paused")
    [1, 2, 5, 6, 9].each { |seq| @fixture.entry(node, "process.observed", {"cpu_seconds" => seq}, seq: seq) }
    get "/telemetry"
    assert_includes last_response.body, "<code>#{node}</code>"
    assert_match(%r{<td class="num">3–4</td><td class="num">2</td>}, last_response.body)
    assert_match(%r{<td class="num">7–8</td><td class="num">2</td>}, last_response.body)
    assert_match(%r{<td class="num"><span class="bad">3</span></td>}, last_response.body, "entries the node dropped")
    get "/telemetry.json"
    assert_equal 2, JSON.parse(last_response.body)["gaps"].size
    get "/nodes"
    assert_includes last_response.body, %(<span class="state paused">paused</span>)
  end

  def test_an_empty_namespace_says_so
    get "/nodes"
    assert_includes last_response.body, "No live node"
    get "/executions"
    assert_includes last_response.body, "No job events in the journal."
    get "/"
    assert_includes last_response.body, "unavailable: no data in this window"
  end

  def test_a_broken_page_is_a_500_without_details
    broken = Class.new { def self.new = raise(NoMethodError, "secret detail") }
    @web = SolidJobs::Web.new(snapshot: broken)
    get "/"
    assert_equal 500, last_response.status
    assert_safe_headers("500")
    assert_includes last_response.body, "NoMethodError"
    refute_includes last_response.body, "secret detail"
  end

  private

  def assert_safe_headers(context)
    h = last_response.headers
    assert_match(/default-src 'none'/, h["content-security-policy"], context)
    assert_match(/frame-ancestors 'none'/, h["content-security-policy"], context)
    assert_equal "nosniff", h["x-content-type-options"], context
    assert_equal "DENY", h["x-frame-options"], context
    assert_equal "no-referrer", h["referrer-policy"], context
    assert_equal "no-store", h["cache-control"], context
  end
end
