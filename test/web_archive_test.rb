# frozen_string_literal: true

require_relative "test_helper"
require_relative "support/archive_tasks"
require "rack/test"
require "rack/lint"
require "cgi/escape" # CGI.escape; all of CGI that Ruby 4.0 still ships
require "solid_jobs/web"

# The archive page, the search box and Console.find's two answers, against a
# real worker (`bundle exec solid-jobs`) filling a real Redis: pages through
# Rack and through `solid-jobs web`.
class WebArchiveTest < SolidJobsTest
  include Rack::Test::Methods

  SENTINEL = "ARGUMENT-SENTINEL-9c41"
  APP = File.join(__dir__, "support", "archive_app.rb")

  def app = Rack::Lint.new(SolidJobs::Web.new(refresh: nil))

  def teardown
    @worker&.stop
    @server&.stop
    super
  end

  def start_worker
    @worker = WorkerProcess.new(redis_url: REDIS.url, namespace: @namespace, log: File.join(@ledger_dir, "worker.log"),
                                app: APP, args: ["--channel", "default", "--channel", "doomed", "--shutdown-timeout", "1"]).start
  end

  # 30 DoomedTask (default, ArgumentError) and 5 DoomedOtherTask (doomed,
  # KeyError), all archived at their first failure.
  def fill_archive
    start_worker
    ids = Array.new(30) { |i| DoomedTask.enqueue("#{SENTINEL}-#{i}") }
    ids += Array.new(5) { |i| DoomedOtherTask.enqueue("#{SENTINEL}-other-#{i}") }
    eventually("35 jobs archived", timeout: 60) { redis.zcard(key("archive")) == 35 }
    ids
  end

  def json(path)
    get path
    assert_equal 200, last_response.status, path
    JSON.parse(last_response.body)
  end

  def test_archive_pages_filters_and_never_shows_arguments_or_messages
    ids = fill_archive
    first = json("/archive.json?limit=25")
    assert_equal 35, first["archived"]
    assert_equal 25, first["entries"].size
    assert_equal redis.zrevrange(key("archive"), 0, 24), first["entries"].map { |e| e["id"] }, "newest first, as archived"
    refute_nil first["next_cursor"]
    second = json("/archive.json?#{URI.encode_www_form("limit" => 25, "cursor" => first["next_cursor"])}")
    assert_equal 10, second["entries"].size
    assert_nil second["next_cursor"], "the archive ends there"
    seen = (first["entries"] + second["entries"]).map { |e| e["id"] }
    assert_equal ids.sort, seen.sort, "every archived job once across the pages"

    # Jobs archived after a cursor was handed out do not shift the next page.
    late = DoomedTask.enqueue("#{SENTINEL}-late")
    eventually("the late job archived") { redis.zcard(key("archive")) == 36 }
    again = json("/archive.json?#{URI.encode_www_form("limit" => 25, "cursor" => first["next_cursor"])}")
    assert_equal second["entries"].map { |e| e["id"] }, again["entries"].map { |e| e["id"] }
    assert_equal late, json("/archive.json?limit=25")["entries"].first["id"]

    # Each page examines a bounded number of entries and says where it stopped.
    archive = SolidJobs::Archive.new
    cursor = nil
    examined = []
    loop do
      page = archive.page(limit: 5, scan: 10, cursor: cursor) { false }
      assert_empty page.entries
      assert_operator page.scanned, :<=, 10
      examined << page.scanned
      break unless (cursor = page.next_cursor)
    end
    assert_equal [10, 10, 10, 6], examined, "36 entries, 10 per page at most"

    other = json("/archive.json?task=DoomedOtherTask")
    assert_equal 5, other["entries"].size
    assert(other["entries"].all? { |e| e["channel"] == "doomed" && e["error_class"] == "KeyError" && e["failures"] == 1 })
    assert_equal({"task" => "DoomedOtherTask"}, other["filters"])
    assert_equal 5, json("/archive.json?error_class=KeyError")["entries"].size
    assert_equal 31, json("/archive.json?channel=default&limit=100")["entries"].size
    assert_empty json("/archive.json?channel=doomed&error_class=ArgumentError")["entries"]
    assert_empty json("/archive.json?task=NoSuchTask")["entries"]

    get "/archive?limit=25"
    html = last_response.body
    assert_equal 200, last_response.status
    assert_includes html, %(<form method="get" action="/archive" class="filters")
    assert_match(%r{href="/archive\?limit=25&amp;cursor=\d+%3A[0-9a-f-]+">older →</a>}, html)
    assert_equal 25, html.scan(%r{<tr><td><a href="/executions/}).size
    assert_includes html, "<code>ArgumentError</code>"
    get "/archive?task=DoomedOtherTask&error_class=KeyError"
    assert_equal 5, last_response.body.scan(%r{<tr><td><a href="/executions/}).size
    assert_includes last_response.body, %(value="DoomedOtherTask")
    assert_includes last_response.headers["content-security-policy"], "form-action 'self'"

    # Nothing a job was given, nor the message it raised, reaches a page,
    # nor a backtrace: the one frame shown is the line that raised (the
    # journal's error_location, docs/dashboard.md "Security"). Checked once
    # the journal is written (batched, off the job path), so the pages hold
    # everything they ever will.
    raised_at = DoomedTask.instance_method(:execute_task).source_location.join(":")
    eventually("the journal written") { json("/executions/#{ids.first}.json").to_s.include?(raised_at) }
    ["/archive", "/archive.json", "/archive?task=DoomedOtherTask", "/search?q=DoomedTask", "/search.json?q=DoomedTask",
     "/executions/#{ids.first}", "/executions/#{ids.first}.json"].each do |path|
      get path
      refute_includes last_response.body, SENTINEL, path
      refute_includes last_response.body, "doomed ", path
      frames = last_response.body.scan(%r{[\w/.-]+\.rb:\d+}).uniq
      assert_includes [[], [raised_at]], frames, "#{path}: no backtrace, at most the line that raised"
    end
  end

  def test_console_find_tells_unknown_from_completed_and_no_longer_retained
    start_worker
    done = LedgerTask.enqueue(ledger_path, "done")
    eventually("the job ran") { ledger_lines.any? { |l| l.start_with?("done ") } }
    console = SolidJobs::Console.new
    # The ack is written after the task returns (batched): "claimed" until then.
    eventually("the completion written") { console.find(done)&.fetch("state") == "completed" }
    found = console.find(done)
    assert_equal false, found["retained"]
    assert_equal 0, found["completions_since"], "nothing completed after it"
    LedgerTask.enqueue(ledger_path, "later")
    eventually("a later completion") { console.find(done)["completions_since"] == 1 }
    assert_nil console.find(SecureRandom.uuid), "an id never enqueued is unknown"
    assert_nil console.find("not-a-job")

    get "/executions/#{done}"
    assert_equal 200, last_response.status
    assert_includes last_response.body, %(<span class="state completed">completed</span>)
    assert_includes last_response.body, "no longer retained"
    unknown = SecureRandom.uuid
    get "/executions/#{unknown}"
    assert_equal 404, last_response.status
    assert_includes last_response.body, "Unknown job id #{unknown}"
  end

  def test_search_finds_a_job_by_id_in_every_state_and_lists_a_tasks_jobs
    start_worker
    archived = DoomedTask.enqueue(SENTINEL)
    ready = CriticalTask.enqueue(ledger_path, "waits") # "critical" is not served by this worker
    planned = LedgerTask.enqueue_after(3600, ledger_path, "planned")
    claimed = SlowTask.enqueue(ledger_path, "slow", 30)
    retrying = PatientTask.enqueue(SENTINEL)
    completed = LedgerTask.enqueue(ledger_path, "completed")
    console = SolidJobs::Console.new
    expected = {archived => "archived", ready => "ready", planned => "planned", claimed => "claimed",
                retrying => "retrying", completed => "completed"}
    eventually("every job in its state", timeout: 30) { expected.all? { |id, state| console.find(id)&.dig("state") == state } }

    expected.each do |id, state|
      get "/search?q=#{id}"
      assert_equal 303, last_response.status, state
      assert_equal "/executions/#{id}", last_response.headers["location"], state
      found = json("/search.json?q=#{id}")
      assert_equal state, found.dig("job", "state"), state
      assert_equal "/executions/#{id}", found["job_path"]
      get "/executions/#{id}"
      assert_includes last_response.body, %(<span class="state #{state}">#{state}</span>), state
    end

    # Mounted elsewhere, the redirect stays under the mount point.
    get "/search?q=#{ready}", {}, "SCRIPT_NAME" => "/jobs"
    assert_equal "/jobs/executions/#{ready}", last_response.headers["location"]

    unknown = SecureRandom.uuid
    get "/search?q=#{unknown}"
    assert_equal 200, last_response.status
    assert_includes last_response.body, "No job <code>#{unknown}</code> is known"

    eventually("the task seen by the node") { json("/search.json?q=Doomed")["tasks"].include?("DoomedTask") }
    by_task = json("/search.json?q=DoomedTask")
    assert_nil by_task["job"]
    assert_equal [archived], by_task["archived"].map { |e| e["id"] }
    get "/search?q=Doomed"
    assert_includes last_response.body, %(<a href="/search?q=DoomedTask">DoomedTask</a>)
    get "/search?q=#{CGI.escape(%(<script>x</script>))}"
    assert_equal 200, last_response.status
    refute_includes last_response.body, "<script>x</script>"
    assert_includes last_response.body, %(value="&lt;script&gt;x&lt;/script&gt;")
  end

  def test_solid_jobs_web_serves_the_archive_and_the_search
    ids = fill_archive
    @server = WebServerProcess.new(redis_url: REDIS.url, namespace: @namespace, log: File.join(@ledger_dir, "web.log")).start
    page = JSON.parse(@server.get("/archive.json?task=DoomedOtherTask&limit=25").body)
    assert_equal 5, page["entries"].size
    html = @server.get("/archive?error_class=KeyError")
    assert_equal "200", html.code
    assert_equal 5, html.body.scan(%r{<tr><td><a href="/executions/}).size
    refute_includes html.body, SENTINEL
    found = @server.get("/search?q=#{ids.last}")
    assert_equal "303", found.code
    # WEBrick makes the Location absolute.
    location = URI(found["location"]).path
    assert_equal "/executions/#{ids.last}", location
    assert_includes @server.get(location).body, %(<span class="state archived">archived</span>)
  end
end
