# frozen_string_literal: true

require_relative "test_helper"

# Node control through the mailbox, against a real `solid-jobs` process:
# requests are written by SolidJobs::Nodes and taken by the node's
# heartbeat.
class NodeControlTest < SolidJobsTest
  def start_worker(concurrency: 2, env: {})
    @worker = WorkerProcess.new(redis_url: REDIS.url, namespace: @namespace, log: File.join(@ledger_dir, "worker.log"),
                                args: ["--concurrency", concurrency.to_s],
                                env: {"SOLID_JOBS_TEST_OBSERVATION_INTERVAL" => "0.3"}.merge(env)).start
    eventually("worker registered", timeout: 60) do
      flunk("the worker exited:\n#{@worker.log_tail}") if @worker.exited?
      @worker.node_id(redis)
    end
  end

  def teardown
    @worker&.kill!
    super
  end

  def node = SolidJobs::Nodes.new.find { |n| n.description&.fetch("pid") == @worker.pid }
  def node_state = SolidJobs::Observations.new.nodes.find { |n| n["node_id"] == node.id }&.dig("node", "state")

  # Waits until node `id` has beaten `count` times from now.
  def heartbeats(id, count)
    stamps = [heartbeat_stamp(id)]
    eventually("#{count} heartbeats of node #{id}") do
      stamp = heartbeat_stamp(id)
      stamps << stamp unless stamp == stamps.last
      stamps.size > count
    end
  end

  def acted_on(action)
    SolidJobs::Telemetry::Journal.new.entries(count: 2000).any? do |e|
      e["event"] == "node.control" && e["source"] == node.id && e.dig("data", "action") == action
    end
  end

  def test_pause_stops_claiming_and_resume_restarts_it
    start_worker
    path = ledger_path
    LedgerTask.enqueue(path, "before")
    eventually("ran before the pause") { ledger_lines.size == 1 }
    request_id = node.request_control(:pause)
    assert_match(/\A\h{8}-/, request_id)
    eventually("paused") { acted_on("pause") && node_state == "paused" }
    LedgerTask.enqueue(path, "while-paused")
    # Three heartbeats after the enqueue, each finding the job ready: a
    # node that claimed would have by then.
    heartbeats(node.id, 3)
    assert_equal 1, redis.llen(key("channel:default")), "a paused node claims nothing"
    assert_equal 1, ledger_lines.size
    node.request_control("resume")
    eventually("ran after the resume") { ledger_lines.size == 2 }
    assert_equal "running", eventually("running observed") { node_state == "running" && node_state }
  end

  def test_backtraces_are_written_on_request
    start_worker
    assert_nil node.backtraces
    node.request_control(:backtraces)
    traces = eventually("backtraces written") { node.backtraces }
    assert_equal node.id, traces["node_id"]
    names = traces["threads"].map { |t| t["name"] }
    assert_includes names, "solid-jobs-monitor"
    assert(traces["threads"].all? { |t| t["backtrace"].is_a?(Array) })
    assert_equal [1, 2], traces["workers"].map { |w| w["worker_id"] }.sort
    assert_match(/Ractor/, traces["note"])
    assert_operator redis.pttl(key("backtraces:#{node.id}")), :>, 0
  end

  def test_shutdown_stops_the_node_gracefully_and_requeues_what_it_held
    start_worker(concurrency: 1, env: {"SOLID_JOBS_TEST_PREFETCH" => "2"})
    id = node.id
    path = ledger_path
    SlowTask.enqueue_many([[path, "running", 1.5], [path, "prefetched", 0]])
    eventually("one running, one prefetched") do
      ledger_lines.include?("start running") && redis.llen(key("channel:default")).zero?
    end
    node.request_control(:shutdown)
    status = @worker.wait(timeout: 30)
    assert_equal 0, status.exitstatus, File.read(@worker.log)
    assert(ledger_lines.any? { |l| l.start_with?("running ") }, "the running task finished: a graceful stop")
    refute(ledger_lines.any? { |l| l.start_with?("start prefetched") }, "the prefetched job did not start")
    assert_equal 1, redis.llen(key("channel:default")), "the prefetched job was requeued"
    refute redis.sismember(key("nodes"), id), "deregistered"
    assert_equal 0, claims_count
    assert_match(/control request .*: shutdown/, File.read(@worker.log))
    @worker = nil
  end

  def test_an_unknown_action_raises_key_error_and_writes_nothing
    start_worker
    before = redis.info("commandstats").slice("cmdstat_rpush", "cmdstat_pexpire", "cmdstat_multi")
    error = assert_raises(KeyError) { node.request_control(:reboot) }
    assert_match(/unknown control action :reboot/, error.message)
    assert_raises(KeyError) { node.request_control("pause!") }
    assert_equal before, redis.info("commandstats").slice("cmdstat_rpush", "cmdstat_pexpire", "cmdstat_multi")
    refute redis.exists?(key("control:#{node.id}"))
  end
end
