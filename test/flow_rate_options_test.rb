# frozen_string_literal: true

require_relative "test_helper"
require "digest"

# Rate limits from the producer's side and in one process (decision 42,
# docs/flow-control.md "Rate limits"): what `task_options rate:` accepts,
# the envelope's meta.flow (its key computed from the documented format),
# the paths that carry it (with a concurrency limit and a unique lock,
# interceptors, recurring ticks) and those that refuse it (SolidEngine,
# the warm pool), and a throttled job as operators see it.
class FlowRateOptionsTest < SolidJobsTest
  class PerAccount
    include SolidJobs::Task
    task_options rate: {limit: 2, per: 60, key: ->(account, *) { "acct:#{account}" }}

    def execute_task(*) = nil
  end

  class Everything
    include SolidJobs::Task
    task_options unique: {while: :queued}, concurrency: {limit: 3, group: "Both"},
                 rate: {limit: 5, per: 1, slack: 0.2, group: "Both"}

    def execute_task(*) = nil
  end

  class Slow
    include SolidJobs::Task

    def execute_task(path)
      Ledger.append(path, "slow")
      sleep 0.6 # simulated work: the rated jobs wait behind it, in the prefetch window, past their slack
    end
  end

  class Tight
    include SolidJobs::Task
    task_options rate: {limit: 10, per: 1, slack: 0.05}

    def execute_task(path, label) = Ledger.append(path, label)
  end

  # The documented key: SHA-256 of "<group>\0rate\0<canonical JSON>", the
  # first 32 hex digits.
  def rate_hex(group, material) = Digest::SHA256.hexdigest("#{group}\0rate\0#{JSON.generate(material)}")[0, 32]

  def ready_envelopes = redis.lrange(key("channel:default"), 0, -1).reverse

  def test_the_option_is_validated_when_the_class_is_defined
    bad = [
      [{limit: 0, per: 1}, /rate limit: must be an Integer from 1 to 10000/],
      [{limit: 10_001, per: 1}, /rate limit: must be an Integer/],
      [{limit: 2}, /rate per: must be a number of seconds from 1 to 86400/],
      [{limit: 2, per: 0.5}, /rate per:/],
      [{limit: 2, per: 86_401}, /rate per:/],
      [{limit: 2, per: 10, slack: 11}, /rate slack: must be a number of seconds from 0.05 to per/],
      [{limit: 2, per: 10, slack: 0}, /rate slack:/],
      [{limit: 2, per: 10, key: "acct"}, /rate key: must be a Proc/],
      [{limit: 2, per: 10, group: "has space"}, /rate group: must be a String/],
      [{limit: 2, per: 10, burst: 3}, /unknown rate option\(s\) \[:burst\]/],
      [2, /must be a Hash/]
    ]
    bad.each do |option, message|
      error = assert_raises(SolidJobs::ConfigurationError) { Class.new { include SolidJobs::Task }.task_options(rate: option) }
      assert_match message, error.message
    end
  end

  def test_the_envelope_carries_the_key_the_limit_and_the_window_with_its_slack
    PerAccount.enqueue(7)
    hex = rate_hex("FlowRateOptionsTest::PerAccount", "acct:7")
    # per 60 s: the default slack is 1 s (a twentieth, at most 1 s).
    assert ready_envelopes.first.end_with?(%("meta":{"flow_label":"acct:7","flow":{"r":"#{hex}","rl":2,"rw":61000,"rs":1000}}})),
           ready_envelopes.first
  end

  def test_a_task_with_every_limit_carries_them_in_order_with_the_lock_last
    Everything.enqueue(1)
    raw = ready_envelopes.first
    meta = JSON.parse(raw)["meta"]
    assert_equal %w[flow unique], meta.keys
    assert_equal({"c" => Digest::SHA256.hexdigest("Both\0concurrency\0null")[0, 32], "cl" => 3,
                  "r" => rate_hex("Both", nil), "rl" => 5, "rw" => 1200, "rs" => 200}, meta["flow"])
    assert_match(/"rw":1200,"rs":200\},"unique":\{"lock":"\h{32}","while":"queued"\}\}\}\z/, raw)
  end

  def test_an_interceptor_cannot_drop_the_limit
    dropper = Class.new do
      def around(publication)
        publication.envelope.delete("meta")
        yield
      end
    end
    SolidJobs.config.publish_interceptors.use(dropper)
    PerAccount.enqueue(3)
    assert_equal rate_hex("FlowRateOptionsTest::PerAccount", "acct:3"), JSON.parse(ready_envelopes.first)["meta"]["flow"]["r"]
  end

  def test_solid_engine_channels_and_the_warm_pool_refuse_rate_limited_tasks
    configure_solid_jobs(backend: :solid_engine, url: "tcp://127.0.0.1:#{RedisServer.closed_port}", backends: {})
    error = assert_raises(SolidJobs::Backends::NotSupported) { PerAccount.enqueue(1) }
    assert_match(/rate limit.*cannot honor/, error.message)
    refute SolidJobs.routing.backend_for("default").supports?(:rate_limits)
  end

  def test_the_warm_pool_refuses_rate_limited_tasks
    SolidJobs::WarmPool.assume_rails = true
    Object.const_set(:FlowRatedPooledProbe, Class.new(LedgerTask) do
      @pool = Mutex.new
      task_options rate: {limit: 1, per: 1}
    end)
    error = assert_raises(SolidJobs::Backends::NotSupported) { FlowRatedPooledProbe.enqueue(+"/dev/null", +"x") }
    assert_match(/a rate limit.*warm pool/, error.message)
    assert_equal 0, redis.llen(key("channel:default"))
  ensure
    SolidJobs::WarmPool.assume_rails = nil
    Object.send(:remove_const, :FlowRatedPooledProbe) if defined?(FlowRatedPooledProbe)
  end

  def test_a_recurring_tick_of_a_rate_limited_task_carries_its_limit
    SolidJobs.configure do |c|
      c.recurring = {"tick" => {task: "FlowRateOptionsTest::PerAccount", every: 1, channel: "ticks", arguments: [9]}}
    end
    start_conductor
    raw = eventually("a tick was enqueued", timeout: 10) { redis.lindex(key("channel:ticks"), 0) }
    meta = JSON.parse(raw)["meta"]
    assert_equal %w[schedule tick_ms flow_label flow], meta.keys
    assert_equal({"r" => rate_hex("FlowRateOptionsTest::PerAccount", "acct:9"), "rl" => 2, "rw" => 61_000, "rs" => 1000},
                 meta["flow"])
  end

  def test_a_throttled_job_is_visible_cancellable_and_released_by_a_nodes_wake
    ids = PerAccount.enqueue_many([[1], [1], [1], [1], [2]])
    backend = SolidJobs.routing.backend_for("default")
    claims = Array.new(5) { backend.claim("default") }.compact
    # Two of account 1 and the one of account 2 admitted; the others of
    # account 1 wait, throttled, for the minute to pass.
    assert_equal [ids[0], ids[1], ids[4]].sort, claims.map(&:job_id).sort
    assert_equal "throttled", SolidJobs::Console.new.find(ids[2])["state"]
    hex = rate_hex("FlowRateOptionsTest::PerAccount", "acct:1")
    waiting = redis.lrange(key("throttled:#{hex}"), 0, -1).map { |r| JSON.parse(r.split("|", 2)[1])["id"] }
    assert_equal [ids[3], ids[2]], waiting
    assert_in_delta redis.lindex(key("rate:#{hex}"), 0).to_i + 61_000, redis.zscore(key("flow:wake"), hex), 0.5
    claims.each { |c| backend.ack(c) }
    assert_nil backend.claim("default"), "an ack gives no rate back"
    assert backend.cancel(ids[2])

    # The minute passes (the log expires; the wake is due): a node that
    # loads the task wakes the key, drops the cancelled job, runs the other.
    redis.del(key("rate:#{hex}"))
    redis.zadd(key("flow:wake"), 0, hex)
    start_conductor
    eventually("the woken job ran", timeout: 15) { SolidJobs::Console.new.find(ids[3])&.fetch("state") == "completed" }
    assert_nil SolidJobs::Console.new.find(ids[2]), "the cancelled throttled job is forgotten"
    refute redis.exists?(key("throttled:#{hex}"))
    assert_equal 0, redis.zcard(key("flow:wake"))
  end

  def test_integrity_check_counts_throttled_jobs_and_names_a_key_without_a_wake
    PerAccount.enqueue_many([[5], [5], [5]])
    backend = SolidJobs.routing.backend_for("default")
    2.times { backend.claim("default") }
    assert_nil backend.claim("default")
    report = SolidJobs::IntegrityCheck.run
    assert_equal 1, report.counts[:throttled]
    assert_empty report.unwoken_throttled
    hex = rate_hex("FlowRateOptionsTest::PerAccount", "acct:5")

    # The dashboard's Flow page lists the key.
    require "rack/mock"
    require "solid_jobs/web"
    web = Rack::MockRequest.new(SolidJobs::Web.new)
    row = JSON.parse(web.get("/flow.json").body)["rate"].find { |k| k["key"] == hex }
    assert_equal({"logged" => 2, "throttled" => 1, "limit" => 2, "window_ms" => 61_000,
                  "task" => "FlowRateOptionsTest::PerAccount", "label" => "acct:5"}, row.except("key", "wake_ms"))
    assert_in_delta redis.zscore(key("flow:wake"), hex), row["wake_ms"], 1
    html = web.get("/flow").body
    assert_includes html, "Rate limits"
    assert_includes html, "acct:5"

    redis.zrem(key("flow:wake"), hex)
    report = SolidJobs::IntegrityCheck.run
    assert_equal [{key: hex, throttled: 1}], report.unwoken_throttled
    refute report.ok?
  end

  def test_a_rate_limited_job_that_waited_past_its_slack_is_handed_back_unstarted
    configure_solid_jobs(concurrency: 1, execution_mode: :thread, prefetch: 4)
    path = ledger_path
    Slow.enqueue(path)
    ids = Tight.enqueue_many([[path, "t1"], [path, "t2"], [path, "t3"]])
    # One worker: the rated jobs are claimed into the prefetch window behind
    # the slow job and wait there 0.6 s, far past their 50 ms slack.
    start_conductor
    eventually("all ran", timeout: 20) { (ledger_lines & %w[t1 t2 t3]).size == 3 }
    assert_operator redis.get(key("metric:handed_back")).to_i, :>=, 1, "a late job went back unstarted"
    require "rack/mock"
    require "solid_jobs/web"
    metrics = Rack::MockRequest.new(SolidJobs::Web.new).get("/metrics").body
    assert_match(/^solid_jobs_jobs_handed_back_total [1-9]/, metrics)
    assert_match(/^solid_jobs_jobs_throttled_total \d+/, metrics)
    assert_equal [1, 1, 1], %w[t1 t2 t3].map { |l| ledger_lines.count(l) }, "a handed back job never started twice"
    eventually("settled") { claims_count.zero? }
    ids.each { |id| assert_equal "completed", SolidJobs::Console.new.find(id)["state"] }
  end
end
