# frozen_string_literal: true

require_relative "test_helper"
require_relative "support/redis_monitor"
require "json"

# Pausing channels (docs/flow-control.md, "Pausing channels") with real
# `solid-jobs` worker processes: a paused channel's jobs stay ready while
# another channel drains; nodes stop claiming from it at their next claim
# (not at a heartbeat); resume wakes idle nodes at once (the doorbell).
# The nodes heartbeat every HEARTBEAT seconds, so anything that happens
# well within that was not waiting for one.
class FlowPauseTest < SolidJobsTest
  HEARTBEAT = 10
  WORKERS = 2

  # The claims and heartbeats the nodes make, by node, as MONITOR shows
  # them: a call naming a node's claims hash and the fence counter is a
  # claim (claim.lua, alone or after an ack), one whose first key is a
  # node's heartbeat key is a heartbeat. Read from the keys, so it does
  # not depend on the scripts' text. Every claim visits all the channels
  # its node serves, paused or not.
  class ScriptWatch
    def initialize(namespace)
      ns = Regexp.escape(namespace)
      kinds = {"claim" => /"#{ns}:claims:([^"]+)" "#{ns}:fence"/, "heartbeat" => /"\d+" "#{ns}:node:([^"]+)" "#{ns}:nodes"/}
      @monitor = RedisMonitor.new(REDIS.url) do |line|
        next unless line.match?(/"EVAL(?:SHA)?"/i)

        kinds.filter_map { |kind, pattern| (node = line[pattern, 1]) && [kind, node] }.first
      end
    end

    def start(redis) = tap { @monitor.start(redis) }

    # Where the calls seen so far end.
    def mark = @monitor.mark

    # {node id => calls of `kind` after `since`}.
    def calls(kind, since = 0) = @monitor.kept(since).filter_map { |k, node| node if k == kind }.tally

    # {node id => its heartbeats since its last claim}, for every node that
    # claimed after `since`.
    def beats_since_last_claim(since)
      @monitor.kept(since).each_with_object({}) do |(kind, node), beats|
        if kind == "claim" then beats[node] = 0
        elsif beats.key?(node) then beats[node] += 1
        end
      end
    end

    def close = @monitor.close
  end

  def teardown
    @watch&.close
    @workers&.each { |w| w.stop(timeout: 10) }
    super
  end

  def watch_scripts
    @watch = ScriptWatch.new(@namespace).start(redis)
  end

  # Enqueues a job on `b` and waits until it ran and every node claimed
  # after the enqueue (its doorbell rings them all): a claim after
  # whatever the caller waited for, by each node.
  def every_node_claims_again(label)
    since = @watch.mark
    enqueue("b", [label])
    eventually("#{label} ran and every node claimed after it was enqueued") do
      labels(label).size == 1 && @watch.calls("claim", since).size == WORKERS
    end
  end

  def start_workers(heartbeat: HEARTBEAT)
    env = {"SOLID_JOBS_TEST_HEARTBEAT" => heartbeat.to_s, "SOLID_JOBS_TEST_RECOVERY_DELAY" => (heartbeat * 3).to_s}
    @workers = Array.new(WORKERS) do |i|
      WorkerProcess.new(redis_url: REDIS.url, namespace: @namespace, log: File.join(@ledger_dir, "worker-#{i}.log"),
                        args: %w[--channel a --channel b --concurrency 2], env: env).start
    end
    @workers.each { |w| eventually("#{w.log} started", timeout: 60) { File.read(w.log).include?("started:") } }
  end

  def enqueue(channel, labels, task: LedgerTask, args: [])
    SolidJobs.client.push_many(task.name, labels.map { |l| [ledger_path, l, *args] }, channel, 3, nil)
  end

  def labels(prefix) = ledger_lines.filter_map { |l| l.split.first if l.start_with?(prefix) }
  # SlowTask's lines: "start <label>" first, "<label> <worker> <pid>" once done.
  def started_labels = ledger_lines.filter_map { |l| l.split[1] if l.start_with?("start ") }
  def finished_labels = ledger_lines.filter_map { |l| l.split.first if l.start_with?("before-", "after-") }
  def depth(channel) = redis.llen(key("channel:#{channel}"))
  def monotonic = Process.clock_gettime(Process::CLOCK_MONOTONIC)

  def test_a_paused_channel_keeps_its_jobs_ready_while_another_drains_and_resume_wakes_idle_nodes
    start_workers
    watch_scripts
    assert SolidJobs::Channels.pause("a", by: "flow-test")
    # Enqueued right after pause returned: never started. Both enqueues ring
    # the doorbell, so the idle nodes claim at once, and skip `a`.
    enqueue("a", Array.new(10) { |i| "a-#{i}" })
    enqueue("b", Array.new(10) { |i| "b-#{i}" })
    eventually("b drained") { labels("b-").size == 10 }
    # Every node claims again once b is empty, and finds `a` paused still.
    every_node_claims_again("late-b")
    assert_empty labels("a-")
    assert_equal 10, depth("a")
    assert_equal 0, depth("b")

    channels = SolidJobs::Catalog.new.channels.to_h { |c| [c["name"], c] }
    assert_equal "flow-test", channels.fetch("a")["paused"]["by"]
    assert_kind_of Integer, channels.fetch("a")["paused"]["paused_ms"]
    assert_nil channels.fetch("b")["paused"]
    assert_equal 10, channels.fetch("a")["depth"]
    assert_equal ["a"], SolidJobs::Channels.paused.keys
    assert SolidJobs::Channels.paused?("a")

    resumed = monotonic
    assert SolidJobs::Channels.resume("a")
    eventually("a drained after resume") { labels("a-").size == 10 }
    waited = monotonic - resumed
    assert_operator waited, :<, HEARTBEAT / 2.0, "resume must wake the idle nodes (doorbell), not wait for a heartbeat"
    assert_equal 0, depth("a")
    assert_empty SolidJobs::Channels.paused
    refute SolidJobs::Channels.resume("a")
  end

  # Pausing while the nodes are busy claiming from the channel: the jobs in
  # their prefetch windows still start, then nothing more does, though
  # the channel still holds most of its jobs; jobs enqueued after pause
  # returned never start before resume.
  def test_busy_nodes_stop_claiming_at_their_next_claim
    start_workers
    watch_scripts
    enqueue("a", Array.new(400) { |i| "before-#{i}" }, task: SlowTask, args: [0.05])
    eventually("jobs running") { ledger_lines.count { |l| l.start_with?("start before-") } >= 12 }
    SolidJobs::Channels.pause("a")
    enqueue("a", Array.new(20) { |i| "after-#{i}" }, task: SlowTask, args: [0.01])
    # The prefetch windows run out: every job started has finished, and no
    # node holds a claim.
    eventually("the nodes hold nothing") { claims_count.zero? && started_labels.sort == finished_labels.sort }
    started = started_labels.size
    every_node_claims_again("late-b")
    assert_equal started, started_labels.size, "a node kept claiming from a paused channel"
    refute(ledger_lines.any? { |l| l.include?("after-") })
    assert_operator depth("a"), :>=, 420 - started
    assert_operator started, :<, 400, "the pause came too late to show anything"

    SolidJobs::Channels.resume("a")
    eventually("everything ran", timeout: 60) { ledger_lines.count { |l| l.start_with?("after-", "before-") } == 420 }
    assert_equal 0, depth("a")
  end

  # A heartbeat asks whether the node's channels hold work, to wake a
  # fetcher that missed a doorbell. A paused backlog must not count, or an
  # idle node would claim (and skip) once per heartbeat: the nodes leave
  # the channels their last claim found paused out of that check. Watched
  # with MONITOR: heartbeats, and not one claim, while paused.
  def test_a_paused_backlog_does_not_wake_idle_nodes_every_heartbeat
    start_workers(heartbeat: 0.25)
    watch = watch_scripts
    SolidJobs::Channels.pause("a")
    since = watch.mark
    enqueue("a", %w[a-1 a-2 a-3]) # its doorbell: each node claims once, and learns `a` is paused
    # Two heartbeats of each node after its last claim: a wake-up the node
    # had coming before it learned (a heartbeat that saw `a`'s backlog) is
    # behind it.
    eventually("every node claimed, then beat twice") do
      beats = watch.beats_since_last_claim(since)
      beats.size == WORKERS && beats.values.all? { |n| n >= 2 }
    end
    quiet = watch.mark
    eventually("four heartbeats of every node") do
      beats = watch.calls("heartbeat", quiet)
      beats.size == WORKERS && beats.values.all? { |n| n >= 4 }
    end
    seen = {"heartbeat" => watch.calls("heartbeat", quiet), "claim" => watch.calls("claim", quiet)}
    assert_operator seen["heartbeat"].values.sum, :>=, WORKERS * 4, "MONITOR saw the heartbeats: #{seen}"
    assert_empty seen["claim"], "idle nodes claimed while their only backlog was paused: #{seen}"
    assert_equal 3, depth("a")

    resumed = monotonic
    SolidJobs::Channels.resume("a")
    eventually("a drained after resume") { labels("a-").size == 3 }
    assert_operator monotonic - resumed, :<, 2.0
  end

  def cli(*args)
    SolidJobsCommand.capture3({"SOLID_JOBS_TEST_NAMESPACE" => @namespace}, "channel", *args,
                              "--require", WorkerProcess::APP, "--redis-url", REDIS.url)
  end

  def test_solid_jobs_channel_pause_list_resume
    enqueue("mailers", %w[m-1 m-2])
    out, err, status = cli("pause", "mailers", "--by", "ops")
    assert status.success?, err
    assert_equal "channel mailers paused\n", out
    out, = cli("pause", "mailers")
    assert_equal "channel mailers was already paused\n", out

    out, err, status = cli("list")
    assert status.success?, err
    header, *rows = out.lines
    assert_match(/\ANAME\s+BACKEND\s+DEPTH\s+STATE\n\z/, header)
    mailers_row = rows.find { |r| r.start_with?("mailers") }
    assert_match(/\Amailers\s+redis\s+2\s+paused since \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ by ops\n\z/, mailers_row)
    out, = cli("list", "--json")
    mailers = JSON.parse(out).find { |c| c["name"] == "mailers" }
    assert_equal 2, mailers["depth"]
    assert_equal "ops", mailers["paused"]["by"]

    out, err, status = cli("resume", "mailers")
    assert status.success?, err
    assert_equal "channel mailers resumed\n", out
    assert_nil SolidJobs::Catalog.new.channels.find { |c| c["name"] == "mailers" }["paused"]
    out, = cli("resume", "mailers")
    assert_equal "channel mailers was not paused\n", out
  end

  # SolidEngine has no pause command: a channel routed there is refused,
  # and Channels.paused lists only what the backends that can pause hold.
  def test_channels_routed_to_solid_engine_cannot_be_paused
    SolidJobs.configure do |c|
      c.backends = {engine: {adapter: :solid_engine, url: "unix:///tmp/never-#{@namespace}.sock"}}
      c.channel_backends = {"fast" => :engine}
    end
    error = assert_raises(SolidJobs::Backends::NotSupported) { SolidJobs::Channels.pause("fast") }
    assert_match(/channel "fast" is routed to the :engine backend \(SolidEngine\), which cannot pause a channel/, error.message)
    assert_raises(SolidJobs::Backends::NotSupported) { SolidJobs::Channels.resume("fast") }
    assert SolidJobs::Channels.pause("default")
    assert_equal ["default"], SolidJobs::Channels.paused.keys
    refute SolidJobs::Backends::SolidEngine::CAPABILITIES[:pause]
    assert SolidJobs::Backends::Redis::CAPABILITIES[:pause]
  end

  # The adapter API claims through the same script: nothing from a paused
  # channel, the job once resumed.
  def test_the_adapter_api_claims_nothing_from_a_paused_channel
    backend = SolidJobs.routing.backend_for("default")
    id = LedgerTask.enqueue(ledger_path, "adapter")
    SolidJobs::Channels.pause("default")
    assert_nil backend.claim("default")
    assert_equal "ready", backend.get_job(id)["state"]
    SolidJobs::Channels.resume("default")
    claim = backend.claim("default")
    assert_equal id, claim.job_id
    assert backend.ack(claim)
  end

  def test_invalid_channel_names_are_refused
    assert_raises(ArgumentError) { SolidJobs::Channels.pause("no spaces") }
    assert_empty SolidJobs::Channels.paused
  end
end
