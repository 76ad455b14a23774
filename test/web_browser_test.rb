# frozen_string_literal: true

require_relative "test_helper"
require_relative "support/headless_chromium"
require_relative "support/archive_tasks"
require "cgi/escape" # all of CGI that Ruby 4.0 still ships

# End to end, as a person sees it: a real worker process runs jobs, the
# dashboard runs as `solid-jobs web`, and headless Chromium opens its pages
# (scripts run, the CSP is enforced). A screenshot of every page is saved
# under tmp/artifacts/ (ignored by git): dashboard-<page>.png.
class WebBrowserTest < SolidJobsTest
  ARTIFACTS = File.join(ROOT, "tmp", "artifacts")
  SENTINEL = "BROWSER-ARGUMENT-SENTINEL-51c9"
  APP = File.join(__dir__, "support", "archive_app.rb")

  def setup
    super
    skip "chromium is not installed (Debian: apt-get install chromium); the browser test needs it" unless HeadlessChromium.path
    @browser = HeadlessChromium.new
  end

  def teardown
    @server&.stop
    @engine_worker&.stop
    @engine&.stop
    if @worker
      @worker.signal("TERM")
      @worker.wait(timeout: 30)
    end
    super
  end

  def test_the_dashboard_shows_a_working_node
    @worker = WorkerProcess.new(redis_url: REDIS.url, namespace: @namespace, log: File.join(@ledger_dir, "worker.log"),
                                app: APP, args: %w[--concurrency 2 --channel default --channel doomed],
                                # Every job's lifecycle journaled, not the first 10 a second: the
                                # page checks below look for particular jobs.
                                env: {"SOLID_JOBS_TEST_SAMPLE_RATE" => "10000"}).start
    configure_solid_jobs(telemetry_sample_rate: 10_000)
    path = ledger_path
    @slow = SlowTask.enqueue(path, SENTINEL, 60) # keeps one worker busy: its current job
    CpuTask.enqueue_many(Array.new(40) { |i| [path, "#{SENTINEL}-#{i}", 20_000] })
    @backlog = Array.new(7) { CriticalTask.enqueue(path, SENTINEL) } # "critical" is not served: it waits
    eventually("the worker ran the CPU jobs") { ledger_lines.count { |l| l.start_with?("#{SENTINEL}-") } == 40 }
    # Enqueued last, the failing job's events are among the newest journal
    # entries, which the executions page reads.
    @failing = ImportCatalog.enqueue(path, SENTINEL, "disk full")
    @archived = Array.new(3) { |i| DoomedTask.enqueue("#{SENTINEL}-doomed-#{i}") } +
                Array.new(2) { |i| DoomedOtherTask.enqueue("#{SENTINEL}-other-#{i}") }
    # The failing ImportCatalog job joins them after its third failure.
    eventually("the doomed jobs archived") { redis.zcard(key("archive")) >= 5 }
    eventually("the slow job started") { ledger_lines.include?("start #{SENTINEL}") }
    eventually("the failure was recorded") { ledger_lines.include?("attempt #{SENTINEL}") }
    @node_id = eventually("the node registered") { @worker.node_id(redis) }
    eventually("the node observed its workers") do
      raw = redis.hget(key("observations:#{@node_id}"), "ractors")
      raw && JSON.parse(raw).any? { |r| r["job_ids"]&.include?(@slow) }
    end
    @server = WebServerProcess.new(redis_url: REDIS.url, namespace: @namespace, log: File.join(@ledger_dir, "web.log")).start

    pages = {
      overview: check_overview, channels: check_channels, nodes: check_nodes,
      executions: check_executions, execution: check_execution, live: check_live_refresh
    }
    pages[:archive] = check_archive
    pages[:search] = check_search
    %w[/resources /redis /telemetry].each { |p| pages[p] = visible(p).tap { |page| refute_text(page, "Internal error", p) } }
    pages.each { |name, page| refute_includes page[:dom], SENTINEL, "#{name} shows a job argument" }

    shots = {"overview" => "/", "channels" => "/channels", "executions" => "/executions",
             "execution" => "/executions/#{@failing}", "nodes" => "/nodes", "resources" => "/resources",
             "redis" => "/redis", "telemetry" => "/telemetry", "archive" => "/archive",
             "archive-filtered" => "/archive?task=DoomedOtherTask", "search" => "/search?q=Doomed"}
    screenshots(shots)
  end

  # A node whose channels are all on SolidEngine, as the Nodes page shows it.
  def test_the_dashboard_shows_an_engine_only_node
    @engine = EngineServer.new.start
    env = {"SOLID_JOBS_TEST_ENGINE_URL" => @engine.url}
    @engine_worker = WorkerProcess.new(redis_url: REDIS.url, namespace: @namespace, app: APP, env: env,
                                       log: File.join(@ledger_dir, "engine-worker.log")).start
    configure_solid_jobs(backend: :solid_engine, url: @engine.url,
                         backends: {solid_engine: {adapter: :solid_engine, url: @engine.url}})
    DoomedTask.enqueue(SENTINEL)
    backend = SolidJobs.routing.backend_for("default")
    eventually("the engine has a dead job") { !backend.client.call(["DEAD"]).empty? }
    eventually("the node announced itself") { !backend.client.call(["NODES"]).empty? }
    # `solid-jobs web` configured like the app: its SolidEngine backend.
    @server = WebServerProcess.new(redis_url: REDIS.url, namespace: @namespace, log: File.join(@ledger_dir, "web.log"),
                                   args: ["--require", APP],
                                   env: env.merge("SOLID_JOBS_TEST_NAMESPACE" => @namespace)).start
    nodes = visible("/nodes")
    assert_text nodes, /Node #{Regexp.escape(Socket.gethostname)}:#{@engine_worker.pid} SolidEngine only running Node id /
    assert_text nodes, /Workers \d+ \(\w+\): \d+ \w+.* Memory \(RSS\) [\d.]+ MiB/
    assert_text nodes, /SolidEngine servers .*solid_engine/
    archive = visible("/archive")
    assert_text archive, /SolidEngine solid_engine ?: dead jobs .*DoomedTask default .*ArgumentError/
    [nodes, archive].each { |page| refute_includes page[:dom], SENTINEL }
    screenshots({"engine-nodes" => "/nodes", "engine-archive" => "/archive"})
  end

  private

  def check_overview
    page = visible("/")
    assert_text page, /Ready 7 /, "the 7 jobs waiting on critical"
    assert_text page, /Nodes 1 /
    assert_text page, /Running now [12] /, "the slow job (and perhaps the retried one, as last observed)"
    assert_operator page[:dom].scan(/<svg[^>]*class="chart"/).size, :>=, 4, "charts are inline SVG"
    assert_dom page, /<path d="M[^"]+" class="line s1">/, "the throughput line is drawn"
    refute_text page, "unavailable: no data in this window"
    @backlog.each { |id| refute_includes page[:dom], id }
    page
  end

  def check_channels
    page = visible("/channels")
    assert_text page, /critical 7 /
    assert_dom page, /<svg[^>]*class="chart bars"/, "depths as SVG bars"
    page
  end

  WORKER_ROW = %r{<tr><td class="num">\d+</td>.*?</tr>}m

  def check_nodes
    # Each worker Ractor appears once it has reported to the node's
    # observations: a Ractor that started late (Ruby 3.4 on a loaded host)
    # is missing from the first snapshot, so the page is read again.
    page = nil
    eventually("both worker Ractors observed", timeout: 15) do
      page = visible("/nodes")
      page[:dom].scan(WORKER_ROW).size == 2
    end
    assert_dom page, /data-node-id="#{@node_id}"/
    assert_text page, /Node #{Regexp.escape(Socket.gethostname)}:#{@worker.pid} running /
    assert_text page, /Workers 2 \(ractor\)/
    workers = page[:dom].scan(WORKER_ROW)
    assert_equal 2, workers.size, "both worker Ractors listed"
    assert workers.any? { |row| row.include?("running") && row.include?(%(href="/executions/#{@slow}")) },
           "a worker runs the slow job, linked"
    assert workers.all? { |row| row.match?(/class="state (running|waiting)"/) }, "each worker's state"
    page
  end

  def check_executions
    page = visible("/executions")
    assert_text page, /CpuTask default (completed|acknowledged) /
    assert_text page, /ImportCatalog default \w+ .*RuntimeError/
    page
  end

  def check_execution
    page = visible("/executions/#{@failing}")
    assert_text page, /Task ImportCatalog /
    assert_text page, /Error RuntimeError/
    assert_dom page, /<svg[^>]*class="chart timeline"/
    page
  end

  def check_archive
    page = visible("/archive")
    assert_text page, /[56] archived in all, newest first/
    assert_text page, /DoomedOtherTask doomed .* KeyError 1 /
    filtered = visible("/archive?task=DoomedOtherTask&error_class=KeyError")
    assert_equal 2, filtered[:dom].scan(%r{<tr><td><a href="/executions/}).size, "the filter, as the form submits it"
    page
  end

  # The search box, as a person uses it: the form's GET, through the CSP
  # (form-action 'self'); a job id lands on the job's page.
  def check_search
    found = visible("/search?q=#{@archived.first}")
    assert_text found, /Execution #{@archived.first} /, "the redirect to the job's page"
    assert_text found, /State now archived /
    page = visible("/search?q=Doomed")
    assert_dom page, %r{<a href="/search\?q=DoomedTask">DoomedTask</a>}
    assert_dom page, %r{<form method="get" action="/search" role="search" class="search">}
    page
  end

  def screenshots(pages)
    shots = pages.map do |name, path|
      @browser.screenshot(@server.url(path), File.join(ARTIFACTS, "dashboard-#{name}.png")).tap do |shot|
        assert_equal "\x89PNG".b, File.binread(shot, 4), name
      end
    end
    puts "\n  screenshots: #{shots.join(" ")}"
  end

  # The page's script refreshes it in place and says when.
  def check_live_refresh
    page = visible("/", wait_ms: 7_000)
    assert_text page, /live · updated \d\d:\d\d:\d\d UTC/, "the live refresh ran and says when"
    page
  end

  # The DOM Chromium built (after scripts ran) and the text a person reads.
  def visible(path, wait_ms: nil)
    dom = @browser.dump_dom(@server.url(path), wait_ms: wait_ms)
    body = dom[%r{<body.*</body>}m].to_s.gsub(%r{<script.*?</script>}m, "")
    text = CGI.unescapeHTML(body.gsub(/<[^>]+>/, " ")).gsub(/\s+/, " ")
    {path: path, dom: dom, text: text}
  end

  # Failure messages show the page's text, not its whole DOM.
  def assert_text(page, pattern, message = nil)
    assert page[:text].match?(pattern), "#{page[:path]}: #{message || "expected #{pattern.inspect}"} in:\n#{page[:text][0, 3000]}"
  end

  def refute_text(page, string, message = nil)
    refute page[:text].include?(string), "#{page[:path]}: #{message || "unexpected #{string.inspect}"}"
  end

  def assert_dom(page, pattern, message = nil)
    assert page[:dom].match?(pattern), "#{page[:path]}: #{message || "expected #{pattern.inspect}"} in the DOM"
  end
end
