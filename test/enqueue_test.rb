# frozen_string_literal: true

require_relative "test_helper"

class EnqueueTest < SolidJobsTest
  UUID = /\A\h{8}-\h{4}-\h{4}-\h{4}-\h{12}\z/

  def test_enqueue_writes_exactly_the_documented_envelope
    before = SolidJobs::Clock.now_ms
    id = CriticalTask.enqueue("p", 42)
    assert_match UUID, id
    raw = redis.lindex(key("channel:critical"), 0)
    envelope = JSON.parse(raw)
    assert_equal %w[id task arguments channel max_failures created_ms queued_ms], envelope.keys
    assert_equal({"id" => id, "task" => "CriticalTask", "arguments" => ["p", 42], "channel" => "critical", "max_failures" => 10},
                 envelope.slice("id", "task", "arguments", "channel", "max_failures"))
    assert_operator envelope["created_ms"], :>=, before
    assert_equal envelope["created_ms"], envelope["queued_ms"]
    assert redis.sismember(key("channels"), "critical")
  end

  def test_task_options_inherit_and_fall_back_to_configured_defaults
    assert_equal({channel: "default", max_failures: 25}, LedgerTask.solid_jobs_options)
    assert_equal({channel: "critical", max_failures: 10}, CriticalTask.solid_jobs_options)
    assert_raises(SolidJobs::ConfigurationError) { Class.new { include SolidJobs::Task }.task_options(retries: 3) }
    assert_raises(SolidJobs::ConfigurationError) { Class.new { include SolidJobs::Task }.task_options(channel: "a b") }
  end

  def test_enqueue_after_and_schedule_at_plan_the_job
    now = SolidJobs::Clock.now_ms
    id1 = LedgerTask.enqueue_after(30, "p", "x")
    id2 = LedgerTask.schedule_at(Time.now + 300, "p", "y")
    assert_equal 0, redis.llen(key("channel:default"))
    planned = redis.zrange(key("planned"), 0, -1, with_scores: true)
    assert_equal 2, planned.size
    (m1, due1), (m2, due2) = planned
    channel, raw = m1.split("|", 2)
    assert_equal "default", channel
    assert_equal id1, JSON.parse(raw)["id"]
    assert_in_delta now + 30_000, due1, 2_000
    assert_equal id2, JSON.parse(m2.split("|", 2).last)["id"]
    assert_in_delta now + 300_000, due2, 2_000
    # The planned score is on Redis' clock (the delay added to TIME); the
    # envelope's queued_ms is the producer's estimate of the same moment.
    assert_in_delta due1.to_i, JSON.parse(raw)["queued_ms"], 1_000, "queued_ms is when the job becomes ready"
  end

  def test_schedule_in_the_past_is_ready_now
    LedgerTask.schedule_at(Time.now - 60, "p", "x")
    assert_equal 1, redis.llen(key("channel:default"))
  end

  def test_enqueue_many_is_one_round_trip_and_returns_ids_in_order
    lists = (1..250).map { |i| ["p", i] }
    # On a Redis that has not seen the script yet the first call is an
    # EVALSHA answered NOSCRIPT and then an EVAL: the cost of a first use,
    # not of a batch. Seen once, it is not sent again.
    LedgerTask.enqueue_many([["p", 0]])
    redis.del(key("channel:default"))
    before = eval_calls
    ids = LedgerTask.enqueue_many(lists)
    assert_equal 1, eval_calls - before, "one script call for the whole batch"
    assert_equal 250, ids.uniq.size
    ids.each { |id| assert_match UUID, id }
    oldest = JSON.parse(redis.lindex(key("channel:default"), -1))
    assert_equal [ids.first, ["p", 1]], [oldest["id"], oldest["arguments"]]
    assert_equal [], LedgerTask.enqueue_many([])
  end

  def test_enqueue_raises_connection_error_when_redis_is_down
    configure_solid_jobs(redis_url: "redis://127.0.0.1:#{RedisServer.closed_port}/0")
    error = assert_raises(SolidJobs::ConnectionError) { LedgerTask.enqueue("p", 1) }
    assert_match(/Redis connection failed/, error.message)
  end

  def test_publish_interceptors_see_and_may_change_or_skip_envelopes
    seen = []
    tagger = Class.new do
      def initialize(seen)
        super()
        @seen = seen
      end

      def around(publication)
        @seen << publication.envelope["task"]
        publication.envelope["arguments"] << "tagged"
        yield unless publication.envelope["arguments"].first == "skip"
      end
    end
    SolidJobs.config.publish_interceptors.use(tagger, seen)
    ids = AnyArgumentsTask.enqueue_many([["a"], ["skip"]])
    assert_equal %w[AnyArgumentsTask AnyArgumentsTask], seen
    assert_nil ids[1]
    assert_equal 1, redis.llen(key("channel:default"))
    assert_equal ["a", "tagged"], JSON.parse(redis.lindex(key("channel:default"), 0))["arguments"]
  end

  private

  def eval_calls
    stats = redis.info("commandstats")
    %w[evalsha eval].sum { |c| stats.dig(c, "calls").to_i }
  end
end
