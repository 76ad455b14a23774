# frozen_string_literal: true

require_relative "test_helper"
require "digest"

# Concurrency limits from the producer's side and in one process
# (docs/flow-control.md): what `task_options concurrency:` accepts, the
# envelope's meta.flow (its key computed from the documented format), the
# paths that carry it (interceptors, unique tasks, recurring ticks) and
# those that refuse it (SolidEngine, the warm pool), and a node honouring it.
class FlowConcurrencyOptionsTest < SolidJobsTest
  class PerTenant
    include SolidJobs::Task
    task_options concurrency: {limit: 1, key: ->(_path, tenant, *) { "tenant:#{tenant}" }}

    def execute_task(path, tenant, label)
      Ledger.append(path, "S #{tenant} #{label} #{Process.clock_gettime(Process::CLOCK_MONOTONIC)}")
      sleep 0.05 # simulated work: two runs of one tenant would overlap if the limit failed
      Ledger.append(path, "E #{tenant} #{label} #{Process.clock_gettime(Process::CLOCK_MONOTONIC)}")
    end
  end

  class Grouped
    include SolidJobs::Task
    task_options concurrency: {limit: 3, group: "Shared"}

    def execute_task(*) = nil
  end

  class GroupedToo
    include SolidJobs::Task
    task_options concurrency: {limit: 3, group: "Shared"}

    def execute_task(*) = nil
  end

  class UniqueLimited
    include SolidJobs::Task
    task_options unique: {while: :running}, concurrency: {limit: 2}

    def execute_task(*) = nil
  end

  # The documented key: SHA-256 of "<group>\0concurrency\0<canonical JSON>",
  # the first 32 hex digits.
  def flow_hex(group, material) = Digest::SHA256.hexdigest("#{group}\0concurrency\0#{JSON.generate(material)}")[0, 32]

  def ready_envelopes = redis.lrange(key("channel:default"), 0, -1).reverse

  def test_the_option_is_validated_when_the_class_is_defined
    bad = [
      [{limit: 0}, /limit: must be an Integer from 1 to 10000/],
      [{limit: 10_001}, /limit: must be an Integer/],
      [{limit: 2.5}, /limit: must be an Integer/],
      [{limit: 2, key: "tenant"}, /key: must be a Proc/],
      [{limit: 2, group: "has space"}, /group: must be a String/],
      [{limit: 2, per: 3}, /unknown concurrency option\(s\) \[:per\]/],
      [2, /must be a Hash/]
    ]
    bad.each do |option, message|
      error = assert_raises(SolidJobs::ConfigurationError) do
        Class.new { include SolidJobs::Task }.task_options(concurrency: option)
      end
      assert_match message, error.message
    end
    unshareable = +"mutable"
    error = assert_raises(SolidJobs::ConfigurationError) do
      Class.new { include SolidJobs::Task }.task_options(concurrency: {limit: 1, key: ->(*) { unshareable }})
    end
    assert_match(/Ractor-shareable/, error.message)
  end

  def test_the_envelope_carries_the_key_the_limit_and_a_label
    PerTenant.enqueue("/dev/null", 7, "a")
    raw = ready_envelopes.first
    hex = flow_hex("FlowConcurrencyOptionsTest::PerTenant", "tenant:7")
    assert raw.end_with?(%("meta":{"flow_label":"tenant:7","flow":{"c":"#{hex}","cl":1}}})), raw

    # group: two tasks share one key; without key:, the material is null.
    Grouped.enqueue(1)
    GroupedToo.enqueue(2)
    a, b = ready_envelopes.last(2).map { |e| JSON.parse(e)["meta"] }
    assert_equal({"c" => flow_hex("Shared", nil), "cl" => 3}, a["flow"])
    assert_equal a["flow"], b["flow"]
    refute a.key?("flow_label")
  end

  def test_a_unique_limited_task_carries_both_with_the_lock_last
    UniqueLimited.enqueue(5)
    raw = ready_envelopes.first
    meta = JSON.parse(raw)["meta"]
    assert_equal %w[flow unique], meta.keys
    assert_equal 2, meta["flow"]["cl"]
    assert_match(/"unique":\{"lock":"\h{32}","while":"running"\}\}\}\z/, raw)
  end

  def test_an_interceptor_cannot_drop_the_limit
    dropper = Class.new do
      def around(publication)
        publication.envelope.delete("meta")
        yield
      end
    end
    SolidJobs.config.publish_interceptors.use(dropper)
    PerTenant.enqueue("/dev/null", 3, "x")
    meta = JSON.parse(ready_envelopes.first)["meta"]
    assert_equal flow_hex("FlowConcurrencyOptionsTest::PerTenant", "tenant:3"), meta["flow"]["c"]
  end

  class NarrowKey
    include SolidJobs::Task
    task_options concurrency: {limit: 1, key: ->(a, b) { [a, b] }}

    def execute_task(*) = nil
  end

  def test_a_key_lambda_that_cannot_take_the_arguments_enqueues_nothing
    error = assert_raises(ArgumentError) { NarrowKey.enqueue("/dev/null") }
    assert_match(/concurrency key: cannot take 1 argument/, error.message)
    assert_equal 0, redis.llen(key("channel:default"))
  end

  def test_solid_engine_channels_refuse_limited_tasks
    configure_solid_jobs(backend: :solid_engine, url: "tcp://127.0.0.1:#{RedisServer.closed_port}", backends: {})
    error = assert_raises(SolidJobs::Backends::NotSupported) { Grouped.enqueue(1) }
    assert_match(/concurrency limit.*cannot honor/, error.message)
    refute SolidJobs.routing.backend_for("default").supports?(:concurrency_limits)
  end

  def test_a_recurring_tick_of_a_limited_task_carries_its_limit
    SolidJobs.configure do |c|
      c.recurring = {"tick" => {task: "FlowConcurrencyOptionsTest::PerTenant", every: 1, channel: "ticks",
                                arguments: ["/dev/null", 9, "tick"]}}
    end
    start_conductor
    raw = eventually("a tick was enqueued", timeout: 10) { redis.lindex(key("channel:ticks"), 0) }
    meta = JSON.parse(raw)["meta"]
    assert_equal %w[schedule tick_ms flow_label flow], meta.keys
    assert_equal({"c" => flow_hex("FlowConcurrencyOptionsTest::PerTenant", "tenant:9"), "cl" => 1}, meta["flow"])
    assert_equal "tenant:9", meta["flow_label"]
  end

  def test_the_warm_pool_refuses_limited_tasks
    SolidJobs::WarmPool.assume_rails = true
    Object.const_set(:FlowPooledProbe, Class.new(LedgerTask) do
      @pool = Mutex.new
      task_options concurrency: {limit: 1}
    end)
    error = assert_raises(SolidJobs::Backends::NotSupported) { FlowPooledProbe.enqueue(+"/dev/null", +"x") }
    assert_match(/warm pool/, error.message)
    assert_equal 0, redis.llen(key("channel:default"))
  ensure
    SolidJobs::WarmPool.assume_rails = nil
    Object.send(:remove_const, :FlowPooledProbe) if defined?(FlowPooledProbe)
  end

  def test_a_node_runs_one_per_key_and_other_keys_alongside
    configure_solid_jobs(concurrency: 4, execution_mode: :thread)
    path = ledger_path
    ids = PerTenant.enqueue_many(Array.new(4) { |i| [path, "a", "a#{i}"] } + [[path, "b", "b0"]])
    # Before any node: a blocked job is found as blocked once a claim met it.
    start_conductor
    eventually("a blocked job is visible") { SolidJobs::Console.new.find(ids[3])&.fetch("state") == "blocked" }
    assert_operator SolidJobs::IntegrityCheck.run.counts[:blocked], :>, 0
    eventually("all ran", timeout: 30) { ledger_lines.count { |l| l.start_with?("E ") } == 5 }
    runs = ledger_lines.map(&:split).group_by { |l| l[1] }
    a = runs.fetch("a").sort_by { |l| Float(l[3]) }
    # Tenant a: strictly one at a time (each start after the previous end).
    a.each_slice(2).map { |s, e| [Float(s[3]), Float(e[3])] }.each_cons(2) do |(_, end1), (start2, _)|
      assert_operator start2, :>=, end1
    end
    # Tenant b ran while tenant a's backlog waited.
    b_start = Float(runs.fetch("b").find { |l| l[0] == "S" }[3])
    assert_operator b_start, :<, Float(a.last[3])
    eventually("settled") { claims_count.zero? }
    report = SolidJobs::IntegrityCheck.run
    assert_empty report.orphaned_slots
    assert_equal 0, report.counts[:blocked]
    assert_empty redis.keys(key("slots:*"))
  end

  def test_the_dashboard_and_the_adapter_api_show_held_and_blocked_keys
    require "rack/mock"
    require "solid_jobs/web"
    ids = PerTenant.enqueue_many(Array.new(3) { |i| ["/dev/null", "a", "a#{i}"] })
    backend = SolidJobs.routing.backend_for("default")
    # The adapter API's claim takes one job; a second claim sets the other
    # two aside (limit 1) and, the list empty, claims nothing.
    claim = backend.claim("default")
    assert_equal ids[0], claim.job_id
    assert_nil backend.claim("default")
    assert_equal "blocked", SolidJobs::Console.new.find(ids[1])["state"]
    web = Rack::MockRequest.new(SolidJobs::Web.new)
    page = JSON.parse(web.get("/flow.json").body)
    hex = flow_hex("FlowConcurrencyOptionsTest::PerTenant", "tenant:a")
    assert_equal [{"key" => hex, "held" => 1, "blocked" => 2, "limit" => 1,
                   "task" => "FlowConcurrencyOptionsTest::PerTenant", "label" => "tenant:a"}], page["concurrency"]
    html = web.get("/flow").body
    assert_includes html, "tenant:a"
    assert_includes html, "Concurrency limits"
    backend.ack(claim)
    assert_equal ids[1], backend.claim("default").job_id, "the ack moved the blocked job back"
  end

  def test_integrity_check_names_a_slot_whose_claim_is_gone
    redis.sadd(key("slots:#{"ab" * 16}"), "12345")
    report = SolidJobs::IntegrityCheck.run
    assert_equal [{key: "ab" * 16, token: 12_345}], report.orphaned_slots
    refute report.ok?
  end
end
