# frozen_string_literal: true

require_relative "test_helper"

# The read APIs the dashboard builds on: Catalog, Telemetry::Journal,
# Console and Nodes (Observations: observations_test.rb).
class ReadApisTest < SolidJobsTest
  SENTINEL = "SENTINEL-read-apis"

  def test_catalog_counts_channels_and_tasks
    configure_solid_jobs(channels: %w[default critical])
    LedgerTask.enqueue_many([[ledger_path, SENTINEL], [ledger_path, "b"]])
    oldest = JSON.parse(redis.lindex(key("channel:default"), -1))
    redis.lset(key("channel:default"), -1, JSON.generate(oldest.merge("queued_ms" => SolidJobs::Clock.now_ms - 3_000)))
    LedgerTask.enqueue_after(60, ledger_path, "later")
    catalog = SolidJobs::Catalog.new
    channels = catalog.channels
    assert_equal %w[critical default], channels.map { |c| c["name"] }
    default = channels.find { |c| c["name"] == "default" }
    assert_equal 2, default["depth"]
    assert_in_delta 3.0, default["latency_s"], 2.0
    assert_equal({"name" => "critical", "depth" => 0, "latency_s" => nil, "paused" => nil, "levels" => nil,
                  "backend" => "redis"}, channels.first)
    assert_equal 1, catalog.planned_count
    assert_equal 0, catalog.retrying_count
    assert_equal 0, catalog.archived_count
    assert_equal 0, catalog.publishing_count
    start_conductor
    eventually("tasks seen by the node and the publisher") { SolidJobs::Catalog.new.tasks.include?("LedgerTask") }
    refute_includes JSON.generate(catalog.channels), SENTINEL
  end

  # Issue 18 item 16: a channel on SolidEngine is counted by its engine
  # (CHANNELS), beside Redis' channels; a channel the engine holds that no
  # routing here names is listed by id; an engine that is down marks only
  # its own channels unavailable.
  def test_catalog_reads_solid_engine_channels_beside_redis_ones
    engine = EngineServer.new.start
    configure_solid_jobs(channels: %w[default], backends: {engine: {adapter: :solid_engine, url: engine.url}},
                         channel_backends: {"engine-jobs" => :engine, "engine-idle" => :engine})
    LedgerTask.enqueue(ledger_path, "redis")
    2.times { |i| LedgerTask.set(channel: "engine-jobs").enqueue(ledger_path, "e#{i}") }
    LedgerTask.set(channel: "engine-jobs").enqueue_after(60, ledger_path, "later")
    client = SolidJobs.routing.backend_for("engine-jobs").client
    client.call(["PUSH", "777", SecureRandom.uuid, "not an envelope"])
    # The head job's age grows with the clock: read until it is a second old.
    by_name = eventually("the head engine job a second old") do
      rows = SolidJobs::Catalog.new.channels.to_h { |c| [c["name"], c] }
      rows if rows.dig("engine-jobs", "latency_s").to_f >= 1.0
    end
    assert_equal %w[default engine#777 engine-idle engine-jobs], by_name.keys.sort
    assert_equal [1, "redis"], by_name["default"].values_at("depth", "backend")
    jobs = by_name["engine-jobs"]
    assert_equal ["engine", 2, 1, 0, 0], jobs.values_at("backend", "depth", "scheduled", "reserved", "dead")
    assert_equal Zlib.crc32("engine-jobs"), jobs["channel_id"]
    assert_operator jobs["latency_s"], :>=, 1.0, "from the head job's queued_ms"
    assert_equal [0, nil], by_name["engine-idle"].values_at("depth", "latency_s"), "routed here, holding nothing"
    assert_equal [1, nil, 777], by_name["engine#777"].values_at("depth", "latency_s", "channel_id"), "no envelope: no age"

    engine.stop
    rows = SolidJobs::Catalog.new.channels.to_h { |c| [c["name"], c] }
    assert_equal 1, rows["default"]["depth"], "Redis' channels are still read"
    assert_nil rows["engine-jobs"]["depth"]
    assert_match(/SolidEngine connection failed/, rows["engine-jobs"]["unavailable"])
  ensure
    engine&.cleanup
  end

  def test_console_finds_jobs_and_manages_the_archive_without_arguments
    console = SolidJobs::Console.new
    id = LedgerTask.enqueue(ledger_path, SENTINEL)
    found = console.find(id)
    assert_equal({"id" => id, "state" => "ready", "channel" => "default", "backend" => "redis"}, found)
    assert_nil console.find(SecureRandom.uuid)

    dead = FailingTask.enqueue(ledger_path, SENTINEL)
    start_conductor
    eventually("first failure") { redis.zcard(key("retrying")) == 1 }
    retrying = console.find(dead)
    assert_equal "retrying", retrying["state"]
    assert_equal 1, retrying["failures"]
    assert_equal "ArgumentError", retrying["error_class"]
    redis.zadd(key("retrying"), 0, redis.zrange(key("retrying"), 0, -1).first)
    redis.publish(key("doorbell"), "planned")
    eventually("archived") { redis.zcard(key("archive")) == 1 }
    @conductor.stop
    @conductor = nil

    archived = console.find(dead)
    assert_equal "archived", archived["state"]
    assert_equal "FailingTask", archived["task"]
    assert_equal 2, archived["failures"]
    list = console.archived(limit: 10)
    assert_equal [dead], list.map { |r| r["id"] }
    assert_equal "ArgumentError", list.first["error_class"]
    refute_includes JSON.generate([found, retrying, archived, list]), SENTINEL, "no arguments, no messages"

    assert console.retry_archived(dead)
    refute console.retry_archived(dead), "no longer archived"
    assert_equal "ready", console.find(dead)["state"]
    redis.del(key("channel:default"))
    redis.hdel(key("jobs"), dead)
    other = FailingTask.enqueue(ledger_path, "x")
    redis.zadd(key("archive"), 1, other)
    redis.hset(key("archive:entries"), other, JSON.generate({"id" => other, "task" => "FailingTask", "channel" => "default"}))
    assert console.discard_archived(other)
    refute console.discard_archived(other)
    assert_equal 0, redis.zcard(key("archive"))
    refute redis.hexists(key("archive:entries"), other)
  end

  def test_nodes_list_registered_nodes_and_queue_control_requests
    conductor = start_conductor
    nodes = SolidJobs::Nodes.new.to_a
    assert_equal [conductor.node_id], nodes.map(&:id)
    node = nodes.first
    assert node.alive?
    assert_equal Process.pid, node.description["pid"]
    request_id = node.request_control(:backtraces)
    # Taken by the node's heartbeat, then written by its monitor.
    traces = eventually("backtraces") { node.backtraces }
    assert_equal request_id, traces["request_id"]
    assert_raises(KeyError) { node.request_control(:explode) }
    refute redis.exists?(key("control:#{node.id}"))
  end

  def test_journal_entries_and_gap_detection
    configure_solid_jobs(observation_interval: 0.2)
    start_conductor
    journal = SolidJobs::Telemetry::Journal.new
    LedgerTask.enqueue_many(Array.new(5) { |i| [ledger_path, "j#{i}"] })
    entries = eventually("entries from the node") do
      all = journal.entries(count: 1000)
      all if all.count { |e| e["source"] == @conductor.node_id } >= 8
    end
    assert_empty journal.gaps(entries), "nothing lost"
    mine = entries.select { |e| e["source"] == @conductor.node_id }.sort_by { |e| e["seq"] }
    assert_equal (1..mine.size).to_a, mine.map { |e| e["seq"] }.first(mine.size) if mine.first["seq"] == 1

    victim = mine[3]
    redis.xdel(key("telemetry"), victim["id"])
    gaps = journal.gaps(journal.entries(count: 1000))
    assert_includes gaps, {"source" => @conductor.node_id, "from" => victim["seq"], "to" => victim["seq"], "size" => 1}

    after = journal.entries(count: 2, after: mine[0]["id"])
    assert_equal 2, after.size
    assert(after.all? { |e| e["id"] > mine[0]["id"] || e["id"].split("-").map(&:to_i) <=> mine[0]["id"].split("-").map(&:to_i) })
    freshness = journal.freshness
    assert_operator freshness["length"], :>, 0
    assert_operator freshness["age_ms"], :>=, 0
  end

  def test_gaps_report_each_missing_range_with_its_size
    journal = SolidJobs::Telemetry::Journal.new
    entries = [1, 2, 5, 6, 9, 9].map { |seq| {"source" => "a", "seq" => seq} } + [{"source" => "b", "seq" => 3}]
    assert_equal [{"source" => "a", "from" => 3, "to" => 4, "size" => 2}, {"source" => "a", "from" => 7, "to" => 8, "size" => 2}],
                 journal.gaps(entries)
  end
end
