# frozen_string_literal: true

require_relative "test_helper"

# The issue's proof for rate limits (decision 42, docs/flow-control.md
# "Rate limits"): 3 real `solid-jobs` processes share two keys limited to
# 20 starts per 2 s. Every start is written to its process's ledger
# (CLOCK_REALTIME, one host); the test counts, for every start s, the
# starts of the same key in [s, s + 2 s) and asserts at most 20. One node
# is SIGKILLed holding claims and replaced: its claimed jobs are recovered
# and start again, and those second starts count against the rate too
# (each claim is an admission). An unlimited channel drains meanwhile.
class FlowRateTest < SolidJobsTest
  KEYS = %w[acct-1 acct-2].freeze
  LIMIT = 20
  PER = 2.0
  JOBS = 160 # per key: 8 windows of 20
  PLAIN = 300

  def setup
    super
    @workers = []
    @seq = 0
  end

  def teardown
    @workers.each(&:kill!)
    super
  end

  def worker
    @seq += 1
    w = WorkerProcess.new(redis_url: REDIS.url, namespace: @namespace, log: File.join(@ledger_dir, "worker-#{@seq}.log"),
                          args: ["--concurrency", "4", "--channel", "default", "--channel", "plain"]).start
    @workers << w
    w
  end

  # Every start: [key, id, time].
  def starts
    Dir.glob(File.join(@ledger_dir, "rate-*")).flat_map do |path|
      File.readlines(path, chomp: true).filter_map do |line|
        kind, key, id, time = line.split
        [key, id, Float(time)] if kind == "S" && time
      end
    end
  end

  def plain_done = Dir.glob(File.join(@ledger_dir, "plain-*")).sum { |p| File.readlines(p).size }

  def test_starts_per_window_never_exceed_the_limit_across_three_nodes_and_a_sigkill
    procs = Array.new(3) { worker }
    procs.each { |p| eventually("#{p.pid} registered", timeout: 30) { p.node_id(redis) } }
    FlowRatedTask.enqueue_many(KEYS.flat_map { |k| Array.new(JOBS) { |i| [@ledger_dir, k, "#{k}-#{i}", 30] } })
    FlowUnlimitedTask.enqueue_many(Array.new(PLAIN) { |i| [@ledger_dir, "p#{i}"] })

    # Unlimited work is not held up by the throttled keys: it drains while
    # they are still in their first windows.
    eventually("the plain channel drained", timeout: 20) { plain_done >= PLAIN }
    assert_operator starts.map(&:first).uniq.size, :>=, 1
    assert_operator starts.size, :<, 2 * JOBS, "the plain channel drained before the rated backlog"

    # A node dies holding rated claims; a fresh one takes its place.
    victim = procs.first
    node = victim.node_id(redis)
    eventually("the victim holds claims", timeout: 30) { redis.hlen(key("claims:#{node}")).positive? }
    victim.kill!
    worker

    eventually("every rated job started", timeout: 60) { starts.map { |s| s[1] }.uniq.size == 2 * JOBS }
    eventually("every claim settled", timeout: 20) { claims_count.zero? }
    by_key = starts.group_by(&:first)
    assert_equal KEYS.sort, by_key.keys.sort
    by_key.each do |k, list|
      times = list.map(&:last).sort
      worst = times.each_with_index.map { |s, i| times[i..].take_while { |t| t < s + PER }.size }.max
      assert_operator worst, :<=, LIMIT, "#{worst} starts of #{k} within #{PER} s"
      # Not vacuous: the key did run at its limit in some window.
      assert_operator worst, :>=, LIMIT - 2, "#{k} never came near its limit (#{worst})"
      span = times.last - times.first
      assert_operator span, :>=, (JOBS / LIMIT - 1) * PER - 0.5, "#{JOBS} starts of #{k} took #{span.round(2)} s"
    end
    assert_operator redis.get(key("metric:throttled")).to_i, :>, 0, "jobs waited in throttled lists"
    assert_empty redis.keys(key("throttled:*")), "no throttled job left behind"
    assert_equal 0, redis.zcard(key("flow:wake")), "no wake left behind"
    assert_equal 0, redis.hlen(key("jobs")), "every job left the index"
  end
end
