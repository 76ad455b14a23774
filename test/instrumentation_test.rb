# frozen_string_literal: true

require_relative "test_helper"
require_relative "support/recording_instrumenter"

# config.instrumenter: the v1 lifecycle events, in order, with correlation
# ids and never an argument; a failing instrumenter changes nothing.
class InstrumentationTest < SolidJobsTest
  def events_path = ledger_path("events")
  def events = RecordingInstrumenter.events(events_path)
  def events_of(id) = events.select { |_, p| p["job_id"] == id }

  def instrument_with(instrumenter = RecordingInstrumenter.new(events_path), **overrides)
    configure_solid_jobs(instrumenter: instrumenter, observation_interval: 0.3, **overrides)
  end

  def journal_entries = SolidJobs::Telemetry::Journal.new.entries(count: 10_000)

  def test_the_default_instrumenter_is_a_shareable_no_op
    assert SolidJobs::Instrumentation.null?(SolidJobs.config.instrumenter)
    assert Ractor.shareable?(SolidJobs::Instrumentation::NULL)
  end

  def test_an_instrumenter_must_respond_to_instrument_and_be_shareable
    error = assert_raises(SolidJobs::ConfigurationError) { SolidJobs.configure { |c| c.instrumenter = Object.new } }
    assert_match(/instrument\(name, payload\)/, error.message)
    captured = []
    holder = Class.new do
      def initialize(block) = (@block = block) # rubocop:disable Lint/MissingSuper -- Class.new of Object: RuboCop 1.39 checks the test class
      def instrument(*) = @block.call
    end.new(proc { captured })
    error = assert_raises(SolidJobs::ConfigurationError) { SolidJobs.configure { |c| c.instrumenter = holder } }
    assert_match(/Ractor-shareable/, error.message)
    assert SolidJobs::Instrumentation.null?(SolidJobs.config.instrumenter), "a refused instrumenter is not installed"
  end

  def test_lifecycle_events_in_order_with_correlation_ids_and_no_arguments
    instrument_with
    sentinel = "SENTINEL-#{SecureRandom.hex(8)}"
    path = ledger_path
    conductor = start_conductor
    id = LedgerTask.enqueue(path, sentinel)
    eventually("job.acknowledged emitted") { events_of(id).any? { |name, _| name == "job.acknowledged" } }

    mine = events_of(id)
    assert_equal %w[job.enqueued job.journaled job.reserved job.started job.completed job.acknowledged], mine.map(&:first)
    worker_side = mine.drop(2).map(&:last)
    assert(worker_side.all? { |p| p["node_id"] == conductor.node_id }, worker_side.inspect)
    assert_equal 1, worker_side.map { |p| p["reservation_id"] }.uniq.size, "one claim token throughout"
    assert_kind_of Integer, worker_side.first["reservation_id"]
    worker_side.each do |p|
      assert_equal %w[LedgerTask default], [p["task"], p["channel"]]
      assert_kind_of Integer, p["worker_id"]
      assert_operator p["ractor_id"], :>=, 2, "a worker Ractor, not the main one"
      assert_kind_of Integer, p["at_ms"]
    end
    assert_kind_of Numeric, mine.find { |n, _| n == "job.completed" }.last["duration_ms"]
    assert_kind_of Integer, mine.find { |n, _| n == "job.started" }.last["latency_ms"]
    assert_match(/\Apublisher:/, mine.first.last["source"])
    assert_equal mine.map { |_, p| p["at_ms"] }, mine.map { |_, p| p["at_ms"] }.sort, "timestamps in order"

    eventually("observations emitted") do
      events.any? { |n, _| n == "ractor.observed" } && events.any? { |n, _| n == "redis.observed" }
    end
    observations = eventually("observations written") do
      (keys = redis.keys(key("observations:*"))).any? && keys.map { |k| redis.hgetall(k) }
    end
    @conductor.stop
    @conductor = nil
    # The publisher's entries arrive with its next flush (once a second).
    mine = eventually("the whole lifecycle journaled") do
      found = journal_entries.select { |e| e.dig("data", "job_id") == id }
      found if found.size == 6
    end
    by_source = mine.group_by { |e| e["source"] }.transform_values { |list| list.sort_by { |e| e["seq"] } }
    publisher, node = by_source.partition { |source, _| source.start_with?("publisher:") }.map { |pairs| pairs.to_h.values.first }
    assert_equal %w[job.enqueued job.journaled], publisher.map { |e| e["event"] }
    assert_equal %w[job.reserved job.started job.completed job.acknowledged], node.map { |e| e["event"] }
    assert_equal conductor.node_id, node.first["source"]
    assert_operator publisher.last["at_ms"], :<=, node.first["at_ms"], "journaled before reserved"
    refute_includes File.read(events_path), sentinel, "no argument in any event"
    refute_includes JSON.generate(journal_entries), sentinel, "no argument in the journal"
    refute_includes JSON.generate(observations), sentinel
  end

  def test_failures_emit_failed_then_retry_scheduled_then_dead
    instrument_with
    id = FailingTask.enqueue(ledger_path, "boom")
    start_conductor
    eventually("retry scheduled") { events_of(id).any? { |n, _| n == "job.retry_scheduled" } }
    member = redis.zrange(key("retrying"), 0, -1).first
    redis.zadd(key("retrying"), 0, member)
    redis.publish(key("doorbell"), "planned")
    eventually("dead") { events_of(id).any? { |n, _| n == "job.dead" } }
    names = events_of(id).map(&:first)
    assert_equal %w[job.enqueued job.journaled job.reserved job.started job.failed job.retry_scheduled
                    job.reserved job.started job.failed job.dead], names
    failed = events_of(id).select { |n, _| n == "job.failed" }.map(&:last)
    assert_equal [1, 2], failed.map { |p| p["failures"] }
    assert_equal [1, 2], failed.map { |p| p["attempt"] }
    assert_equal %w[ArgumentError ArgumentError], failed.map { |p| p["error_class"] }
    assert_match(/tasks\.rb:\d+\z/, failed.first["error_location"])
    journaled = eventually("job.failed journaled") do
      found = journal_entries.select { |e| e["event"] == "job.failed" && e.dig("data", "job_id") == id }
      found.size == 2 && found
    end
    assert(journaled.all? { |e| e.dig("data", "error_location").to_s.match?(/tasks\.rb:\d+\z/) },
           "the journal records where the task raised: #{journaled.map { |e| e["data"] }}")
    refute(failed.any? { |p| p.key?("message") }, "no error message: it may quote arguments")
    assert_equal "archived", events_of(id).last.last["reason"]
    assert_operator events_of(id).find { |n, _| n == "job.retry_scheduled" }.last["retry_at_ms"], :>, 0
  end

  def test_an_unknown_task_emits_failed_and_retry_scheduled_then_dead_counting_its_attempts
    instrument_with(unknown_task_retry_for: 1)
    id = SecureRandom.uuid
    envelope = {"id" => id, "task" => "NotDeployedYet", "arguments" => [], "channel" => "default", "max_failures" => 3,
                "created_ms" => 1, "queued_ms" => 1}
    redis.lpush(key("channel:default"), JSON.generate(envelope))
    start_conductor
    eventually("dead") { events_of(id).any? { |n, _| n == "job.dead" } }
    names = events_of(id).map(&:first)
    assert_equal %w[job.reserved job.failed job.retry_scheduled], names.first(3)
    assert_equal %w[job.failed job.dead], names.last(2)
    refute_includes names, "job.started", "the task never ran"
    failed = events_of(id).select { |n, _| n == "job.failed" }.map(&:last)
    assert_equal (1..failed.size).to_a, failed.map { |p| p["failures"] }
    assert_equal ["SolidJobs::UnknownTaskError"], failed.map { |p| p["error_class"] }.uniq
    assert_equal [failed.size, "archived"], events_of(id).last.last.values_at("failures", "reason")
  end

  def test_a_job_is_not_reservable_until_enqueued_and_journaled_were_emitted
    # The instrumenter looks at Redis while job.journaled is being emitted.
    probe = Class.new do
      def initialize(path, list) = (@path, @list = path.freeze, list.freeze) # rubocop:disable Lint/MissingSuper -- Class.new of Object: RuboCop 1.39 checks the test class

      def instrument(name, payload)
        return unless name == "job.journaled"

        seen = [SolidJobs.client.call(["LLEN", @list]), SolidJobs.client.call(["ZCARD", @list.sub(/channel:.*/, "publishing")])]
        File.write(@path, JSON.generate([payload[:job_id], *seen]))
      end
    end
    configure_solid_jobs(instrumenter: probe.new(events_path, key("channel:default")))
    id = LedgerTask.enqueue(ledger_path, "x")
    assert_equal [id, 0, 1], JSON.parse(File.read(events_path)), "held behind the barrier: not in its channel"
    assert_equal 1, redis.llen(key("channel:default")), "released once the events were emitted"
    assert_equal 0, redis.zcard(key("publishing"))
    assert_equal "ready", SolidJobs.client.job_state(id).first
  end

  def test_a_raising_instrumenter_changes_nothing
    configure_solid_jobs(instrumenter: RaisingInstrumenter.new.freeze, observation_interval: 0.3)
    path = ledger_path
    LedgerTask.enqueue_many(Array.new(5) { |i| [path, "ok-#{i}"] })
    failing = FailingTask.enqueue(path, "f")
    start_conductor
    eventually("every job ran") { ledger_lines.count { |l| l.start_with?("ok-") } == 5 }
    eventually("completions written") { redis.get(key("metric:processed")).to_i == 5 }
    eventually("the failure was recorded and a retry scheduled") { redis.zcard(key("retrying")) == 1 }
    assert_equal 1, JSON.parse(redis.hget(key("attempts"), failing))["failures"]

    SlowTask.enqueue(path, "slow", 3)
    eventually("slow task started") { ledger_lines.include?("start slow") }
    refute @conductor.stop(timeout: 0.2), "still running at the timeout"
    @conductor = nil
    assert_equal 1, redis.llen(key("channel:default")), "shutdown requeued the running task"
    assert_equal 0, claims_count
  end

  def test_an_interrupt_from_the_instrumenter_propagates_and_shutdown_requeues_the_job
    # Thread workers, so the interrupted worker's death is not reported on
    # stderr (a Ractor's always is).
    instrument_with(RecordingInstrumenter.new(events_path, raise_on: ["job.started"], error: Interrupt), execution_mode: :thread)
    id = LedgerTask.enqueue(ledger_path, "interrupted")
    reporting = Thread.report_on_exception
    Thread.report_on_exception = false
    start_conductor
    Thread.report_on_exception = reporting
    eventually("the worker was interrupted") { events_of(id).any? { |n, _| n == "job.started" } }
    # The interrupt ended its worker thread and reaches whoever joins it.
    assert_raises(Interrupt) { @conductor.stop(timeout: 1) }
    @conductor = nil
    assert_empty ledger_lines, "the task never ran"
    assert_equal 1, redis.llen(key("channel:default")), "requeued at shutdown"
    assert_equal 0, claims_count
  end
end
