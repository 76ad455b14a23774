# frozen_string_literal: true

require "csv"
require_relative "test_helper"
require_relative "support/benchmark_smoke"

# benchmark/flow.rb at tiny sizes, so it cannot rot: every scenario drained
# without errors (no job lost behind a limit), the ratio lines name each
# limited case, and the files were written. No figure is asserted but the
# ones the design fixes: a hot key blocks jobs, an unlimited task blocks none.
class FlowBenchmarkSmokeTest < Minitest::Test
  include BenchmarkSmoke

  def test_flow_harness_runs_all_scenarios_side_by_side
    out, status = run_benchmark("flow.rb")
    assert status.success?, out
    SCENARIOS.each { |s| assert_match(/^\| 2 \| #{s}\s+\|[^\n]*\| 0\s+\|$/, out) }
    SCENARIOS.drop(1).each { |s| assert_match(%r{^- #{s} / unlimited at c=2: jobs/s [\d.]+x}, out) }
    assert_match(%r{^- unlimited-beside-throttled / unlimited at c=2: jobs/s [\d.]+x.*\(the unlimited jobs' drain rate}, out)
    rows = csv_rows
    assert_equal SCENARIOS, rows.keys
    assert_equal 0.0, rows.fetch("unlimited").fetch("blocked_per_job")
    assert_operator rows.fetch("limited-hot").fetch("blocked_per_job"), :>, 0.0, out
    assert_equal 0.0, rows.fetch("rate-spread").fetch("throttled_per_job"), "every key is under its rate"
    # The backlog: one throttled job after every 10 unlimited ones; the
    # first window admits 10 of them, the rest are set aside at least once.
    beside = rows.fetch("unlimited-beside-throttled")
    assert_equal 400, beside.fetch("jobs"), "only the unlimited jobs are the case"
    assert_equal 40, beside.fetch("backlog_jobs")
    assert_operator beside.fetch("throttled_per_job"), :>=, 30 / 400.0, out
    assert_operator beside.fetch("backlog_started"), :<=, 40, out
    assert_match(/^## Ratios/, result("flow.md"))
  end

  # The backlog left throttled when the case ends is not in the next case:
  # each case has its own redis-server (a run of the beside case first, the
  # baseline after it, sees no throttled job and no backlog start).
  def test_a_throttled_backlog_does_not_reach_the_next_case
    out, status = run_benchmark("flow.rb", "BENCH_SCENARIOS" => "unlimited-beside-throttled,unlimited")
    assert status.success?, out
    rows = csv_rows
    assert_equal %w[unlimited-beside-throttled unlimited], rows.keys
    assert_operator rows.fetch("unlimited-beside-throttled").fetch("throttled_per_job"), :>, 0.0, out
    assert_equal 0.0, rows.fetch("unlimited").fetch("throttled_per_job"), out
    assert_nil rows.fetch("unlimited").fetch("backlog_started"), out
    assert_equal 0, rows.fetch("unlimited").fetch("errors"), out
  end

  def test_flow_takes_its_lists_from_the_environment
    out, status = run_benchmark("flow.rb", "BENCH_SCENARIOS" => "unlimited,limited-hot", "BENCH_JOBS" => "limited-hot=300",
                                           "BENCH_NOTE" => "shared host")
    assert status.success?, out
    rows = result("flow.csv").lines.drop(2).map { |l| l.split(",").first(3).join(",") }
    assert_equal ["unlimited,2,400", "limited-hot,2,300"], rows
    assert_match(/^\*\*Note\.\*\* shared host$/, result("flow.md"))
  end

  SCENARIOS = %w[unlimited limited-spread limited-hot rate-spread unlimited-beside-throttled].freeze

  # flow.csv's rows by scenario, each a Hash by column (numbers parsed,
  # empty cells nil; the first line is the host header).
  def csv_rows
    CSV.parse(result("flow.csv").lines.drop(1).join, headers: true, converters: :numeric).to_h do |row|
      [row["scenario"], row.to_h]
    end
  end

  def test_a_bad_setting_fails_before_anything_runs
    out, status = run_benchmark("flow.rb", "BENCH_CLIENTS" => "sidekiq")
    refute status.success?
    assert_match(/BENCH_CLIENTS: unknown sidekiq \(choose from solid-jobs\)/, out)
  end
end
