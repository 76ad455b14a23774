# frozen_string_literal: true

require_relative "test_helper"
require "json"

# Priorities 0..9 (docs/flow-control.md, "Priorities"; decision 41) with a
# real `solid-jobs` worker process: with a backlog of mixed priorities the
# claim order follows priority (0 first), FIFO within a level, asserted on
# the ledger the worker writes; jobs due together keep that order through
# promotion; the API refuses what it cannot honor.
class FlowPriorityTest < SolidJobsTest
  def teardown
    @worker&.stop(timeout: 10)
    super
  end

  # One worker thread: the ledger's order is the order jobs were handed
  # out, claim after claim (each claim's batch is delivered in order).
  def start_worker(channel = "a")
    log = File.join(@ledger_dir, "worker.log")
    @worker = WorkerProcess.new(redis_url: REDIS.url, namespace: @namespace, log: log,
                                args: ["--channel", channel, "--concurrency", "1"]).start
    eventually("#{log} started", timeout: 60) { File.exist?(log) && File.read(log).include?("started:") }
  end

  # Ledger labels "p-<priority>-<n>" -> [[priority, n], ...] in run order.
  def runs = ledger_lines.map { |l| l.split.first.split("-").drop(1).map(&:to_i) }

  def test_a_mixed_backlog_runs_by_priority_then_enqueue_order
    rng = Random.new(17)
    jobs = Array.new(300) { |n| [rng.rand(10), n] }
    # Both spellings, single and batched: per-job Task.set, and one
    # enqueue_many per level; the task's own default (5) for the rest.
    jobs.each_slice(30).with_index do |slice, i|
      if i.even?
        slice.each { |p, n| LedgerTask.set(priority: p).enqueue(ledger_path, "p-#{p}-#{n}") }
      else
        slice.group_by(&:first).each do |p, group|
          lists = group.map { |_, n| [ledger_path, "p-#{p}-#{n}"] }
          p == 5 ? LedgerTask.enqueue_many(lists.map { |l| l }) : LedgerTask.set(priority: p).enqueue_many(lists)
        end
      end
    end
    # Not on channel "a": LedgerTask's channel is default. Route by Task.set.
    assert_equal 0, redis.llen(key("channel:a"))
    levels = (0..9).reject { |p| p == 5 }.select { |p| redis.exists?(key("channel:default:#{p}")) }
    assert_equal jobs.map(&:first).uniq.sort - [5], levels
    assert_equal ["default"], redis.smembers(key("channels")), "the channel set names channels, never routes"
    report = SolidJobs::IntegrityCheck.run
    assert_empty report.unknown_channels, "a level list belongs to its channel"
    assert_empty report.unserved_channels

    start_worker("default")
    eventually("all 300 ran", timeout: 40) { ledger_lines.size == 300 }
    order = runs
    assert_equal jobs.sort, order.sort, "every job ran exactly once"
    priorities = order.map(&:first)
    assert_equal priorities.sort, priorities, "levels are non-decreasing (0 first, 9 last)"
    order.chunk_while { |x, y| x[0] == y[0] }.each do |level|
      # Within a level, enqueue order: the i-th enqueued of the slice order.
      expected = jobs.select { |p, _| p == level[0][0] }
      assert_equal expected, level, "FIFO within level #{level[0][0]}"
    end
    10.times { |p| assert_equal 0, redis.llen(key(p == 5 ? "channel:default" : "channel:default:#{p}")) }
  end

  # Rails' own case (the Active Job suite showed it 3 times out of 8):
  # two jobs due at the same instant run in priority order. Here through
  # schedule_at, 8 rounds, with the worker already running, so each pair is
  # promoted by the same promote.lua call into different level lists.
  def test_jobs_due_together_run_in_priority_order
    start_worker("default")
    8.times do |round|
      at = Time.now + 0.6
      LedgerTask.set(priority: 8).schedule_at(at, ledger_path, "p-8-#{round}")
      LedgerTask.set(priority: 7).schedule_at(at, ledger_path, "p-7-#{round}")
      eventually("round #{round} ran") { ledger_lines.size == 2 * (round + 1) }
    end
    runs.each_slice(2).with_index do |pair, round|
      assert_equal [[7, round], [8, round]], pair, "round #{round}"
    end
  end

  def test_priority_options_are_checked
    error = assert_raises(SolidJobs::ConfigurationError) do
      Class.new { include SolidJobs::Task }.task_options(priority: 10)
    end
    assert_match(/priority must be an Integer from 0/, error.message)
    assert_raises(SolidJobs::ConfigurationError) { Class.new { include SolidJobs::Task }.task_options(priority: "1") }
    error = assert_raises(SolidJobs::ConfigurationError) do
      Class.new { include SolidJobs::Task }.task_options(priority: 2, recurring: {every: 60})
    end
    assert_match(/priority and recurring cannot be combined yet/, error.message)
    assert_raises(ArgumentError) { LedgerTask.set(priority: -1) }
    assert_raises(ArgumentError) { LedgerTask.set(channel: "no spaces") }
    configured = LedgerTask.set(priority: 2, channel: "b")
    assert configured.frozen?
    id = configured.enqueue(ledger_path, "x")
    envelope = JSON.parse(redis.lrange(key("channel:b:2"), 0, -1).fetch(0))
    assert_equal [id, "b", {"priority" => 2}], envelope.values_at("id", "channel", "meta")
    assert_equal "ready|b:2", redis.hget(key("jobs"), id)
    assert_equal "ready", SolidJobs.routing.backend_for("b").get_job(id)["state"]
    captured = SolidJobs.testing!(:capture) { LedgerTask.set(priority: 3).enqueue(ledger_path, "t") && LedgerTask.captured }
    assert_equal [{"priority" => 3}], captured.map { |e| e["meta"] }, "testing mode records the priority"
  end

  class UrgentTask
    include SolidJobs::Task
    task_options priority: 1

    def execute_task(*) = nil
  end

  def test_the_task_option_is_the_default_and_set_overrides_it
    UrgentTask.enqueue
    UrgentTask.set(priority: 5).enqueue
    assert_equal 1, redis.llen(key("channel:default:1"))
    plain = JSON.parse(redis.lrange(key("channel:default"), 0, -1).fetch(0))
    refute plain.key?("meta"), "priority 5 leaves the envelope as it always was"
  end

  # The Catalog (and so the dashboard's Channels page) counts every level.
  def test_the_catalog_counts_a_channels_levels
    2.times { UrgentTask.enqueue }
    UrgentTask.set(priority: 8).enqueue
    UrgentTask.set(priority: 5).enqueue
    row = SolidJobs::Catalog.new.channels.find { |r| r["name"] == "default" }
    assert_equal 4, row["depth"]
    assert_equal({1 => 2, 8 => 1}, row["levels"])
    assert_operator row["latency_s"], :>=, 0
    LedgerTask.set(channel: "plain").enqueue(ledger_path, "x")
    plain = SolidJobs::Catalog.new.channels.find { |r| r["name"] == "plain" }
    assert_equal [1, nil], plain.values_at("depth", "levels"), "a channel without levels"
  end

  def test_interceptors_see_the_priority_and_may_change_it
    bumper = Class.new do
      def around(publication)
        envelope = publication.envelope
        raise "the interceptor sees meta.priority" unless envelope.dig("meta", "priority") == 8

        envelope["meta"] = {"priority" => 0} if envelope.dig("arguments", 1) == "bump"
        yield
      end
    end
    SolidJobs.config.publish_interceptors.use(bumper)
    LedgerTask.set(priority: 8).enqueue(ledger_path, "bump")
    LedgerTask.set(priority: 8).enqueue(ledger_path, "keep")
    assert_equal 1, redis.llen(key("channel:default:0"))
    assert_equal 1, redis.llen(key("channel:default:8"))
  end

  def test_solid_engine_channels_refuse_a_priority
    SolidJobs.configure do |c|
      c.backends = {engine: {adapter: :solid_engine, url: "unix:///tmp/never-#{@namespace}.sock"}}
      c.channel_backends = {"fast" => :engine}
    end
    fast = LedgerTask.set(priority: 3, channel: "fast")
    error = assert_raises(SolidJobs::Backends::NotSupported) { fast.enqueue(ledger_path, "x") }
    assert_match(/priority 3, which the :engine backend cannot honor/, error.message)
    refute SolidJobs::Backends::SolidEngine::CAPABILITIES[:priority]
    assert SolidJobs::Backends::Redis::CAPABILITIES[:priority]
  end
end
