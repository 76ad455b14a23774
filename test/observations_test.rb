# frozen_string_literal: true

require_relative "test_helper"
require_relative "support/recording_instrumenter"

# Every observation_interval a node observes its process, each worker and
# its Redis connection, writes them to `observations:<node>` and the
# journal, and emits process/ractor/redis.observed to the instrumenter.
class ObservationsTest < SolidJobsTest
  def events_path = ledger_path("events")
  def observed(name) = RecordingInstrumenter.events(events_path).select { |n, _| n == name }.map(&:last)

  def test_observations_have_sane_values_and_freshness
    configure_solid_jobs(observation_interval: 0.3)
    path = ledger_path
    conductor = start_conductor
    SlowTask.enqueue(path, "busy", 2)
    eventually("started") { ledger_lines.include?("start busy") }
    node = eventually("a running worker observed") do
      found = SolidJobs::Observations.new.nodes.find { |n| n["node_id"] == conductor.node_id }
      found if found && found["ractors"].any? { |r| r["state"] == "running" }
    end
    assert node["alive"]
    assert node["fresh"], node.inspect
    process = node["process"]
    assert_equal "ok", process["state"]
    assert_operator process["cpu_seconds"], :>, 0
    assert_operator process["rss_bytes"], :>, 1_000_000
    assert_operator process["gc_count"], :>=, 0
    assert_kind_of Integer, process["gc_time_ms"]
    assert_operator process["total_allocated_objects"], :>, 0
    ractors = node["ractors"]
    assert_equal [1, 2], ractors.map { |r| r["worker_id"] }.sort
    running = ractors.find { |r| r["state"] == "running" }
    assert_equal 1, running["job_ids"].size
    assert_operator running["ractor_id"], :>=, 2
    assert_equal "connected", node["redis"]["state"]
    assert_equal false, node["redis"]["stale"]
    assert_equal conductor.node_id, node["node"]["node_id"]
    assert_equal "running", node["node"]["state"]
    assert_operator redis.pttl(key("observations:#{conductor.node_id}")), :>, 0, "expires when the node is gone"
    events = SolidJobs::Telemetry::Journal.new.entries(count: 1000).map { |e| e["event"] }
    assert_includes events, "process.observed"
    assert_includes events, "ractor.observed"
    assert_includes events, "redis.observed"
  end

  def test_a_redis_outage_is_observed_as_disconnected_with_the_last_value_stale
    outage = RedisServer.new.start
    configure_solid_jobs(redis_url: outage.url, observation_interval: 0.3,
                         instrumenter: RecordingInstrumenter.new(events_path))
    start_conductor
    eventually("connected observed") { observed("redis.observed").any? { |r| r["state"] == "connected" } }
    outage.stop
    down = eventually("disconnected observed") { observed("redis.observed").find { |r| r["state"] == "disconnected" } }
    assert down["stale"]
    assert_kind_of Integer, down["last_ok_ms"]
    assert_operator down["age_ms"], :>=, 0
    assert_equal "ok", observed("process.observed").last["state"], "the process is still observed"
    outage.start
    eventually("connected again") { observed("redis.observed").last["state"] == "connected" }
    node = eventually("observations written again") do
      SolidJobs::Observations.new.nodes.find { |n| n["node_id"] == @conductor.node_id && n["redis"]["state"] == "connected" }
    end
    assert node["fresh"]
    entries = SolidJobs::Telemetry::Journal.new.entries(count: 5000)
    states = entries.select { |e| e["event"] == "redis.observed" }.map { |e| e.dig("data", "state") }
    assert_includes states, "disconnected", "observations made during the outage reach the journal afterwards"
  ensure
    @conductor&.stop(timeout: 1)
    @conductor = nil
    outage&.cleanup
  end

  def test_a_value_never_read_is_unavailable_and_one_that_fails_later_is_stale_with_its_age
    calls = 0
    readers = {"cpu_seconds" => -> { 1.5 }, "flaky" => -> { (calls += 1) == 1 ? 7 : raise(IOError) },
               "missing" => -> { raise Errno::ENOENT }}
    observation = SolidJobs::ProcessObservation.new(readers)
    first = observation.read(1_000)
    assert_equal "ok", SolidJobs::ProcessObservation.new(readers.slice("cpu_seconds")).read(1)["state"]
    assert_equal 7, first["flaky"]
    assert_nil first["missing"]
    assert_equal ["missing"], first["unavailable"]
    later = observation.read(4_000)
    assert_equal 7, later["flaky"], "the last value is kept"
    assert_equal "stale", later["state"]
    assert later["stale"]
    assert_equal 3_000, later["age_ms"]
    none = SolidJobs::ProcessObservation.new({"x" => -> { raise IOError }}).read(1)
    assert_equal "unavailable", none["state"]
  end
end
