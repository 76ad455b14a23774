# frozen_string_literal: true

require_relative "test_helper"
require_relative "support/headless_chromium"
require "cgi"

# End to end, as a person sees it: a real worker process runs jobs, the
# dashboard runs as `solid-jobs web`, and headless Chromium opens its pages
# (scripts run, the CSP is enforced). Screenshots of the overview and the
# nodes page are saved under tmp/artifacts/ (ignored by git).
class WebBrowserTest < SolidJobsTest
  ARTIFACTS = File.join(ROOT, "tmp", "artifacts")
  SENTINEL = "BROWSER-ARGUMENT-SENTINEL-51c9"

  def setup
    super
    skip "chromium is not installed (Debian: apt-get install chromium); the browser test needs it" unless HeadlessChromium.path
    @browser = HeadlessChromium.new
  end

  def teardown
    @server&.stop
    if @worker
      @worker.signal("TERM")
      @worker.wait(timeout: 30)
    end
    super
  end

  def test_the_dashboard_shows_a_working_node
    @worker = WorkerProcess.new(redis_url: REDIS.url, namespace: @namespace, log: File.join(@ledger_dir, "worker.log"),
                                args: %w[--concurrency 2 --channel default],
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
    %w[/resources /redis /telemetry].each { |p| pages[p] = visible(p).tap { |page| refute_text(page, "Internal error", p) } }
    pages.each { |name, page| refute_includes page[:dom], SENTINEL, "#{name} shows a job argument" }

    shot = @browser.screenshot(@server.url("/"), File.join(ARTIFACTS, "dashboard-overview.png"))
    @browser.screenshot(@server.url("/nodes"), File.join(ARTIFACTS, "dashboard-nodes.png"))
    assert_equal "\x89PNG".b, File.binread(shot, 4)
    puts "\n  screenshots: #{ARTIFACTS}/dashboard-{overview,nodes}.png"
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

  def check_nodes
    page = visible("/nodes")
    assert_dom page, /data-node-id="#{@node_id}"/
    assert_text page, /Node #{Regexp.escape(Socket.gethostname)}:#{@worker.pid} running /
    assert_text page, /Workers 2 \(ractor\)/
    workers = page[:dom].scan(%r{<tr><td class="num">\d+</td>.*?</tr>}m)
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
