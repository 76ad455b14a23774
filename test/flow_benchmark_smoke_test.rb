# frozen_string_literal: true

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
    %w[unlimited limited-spread limited-hot].each { |s| assert_match(/^\| 2 \| #{s}\s+\|[^\n]*\| 0\s+\|$/, out) }
    assert_match(%r{^- limited-spread / unlimited at c=2: jobs/s [\d.]+x}, out)
    assert_match(%r{^- limited-hot / unlimited at c=2: jobs/s [\d.]+x}, out)
    rows = result("flow.csv").lines.drop(2).to_h { |l| l.split(",").then { |f| [f[0], f] } }
    assert_equal %w[unlimited limited-spread limited-hot], rows.keys
    header = result("flow.csv").lines[1].chomp.split(",")
    blocked = ->(s) { Float(rows.fetch(s)[header.index("blocked_per_job")]) }
    assert_equal 0.0, blocked.("unlimited")
    assert_operator blocked.("limited-hot"), :>, 0.0, out
    assert_match(/^## Ratios/, result("flow.md"))
  end

  def test_flow_takes_its_lists_from_the_environment
    out, status = run_benchmark("flow.rb", "BENCH_SCENARIOS" => "unlimited,limited-hot", "BENCH_JOBS" => "limited-hot=300",
                                           "BENCH_NOTE" => "shared host")
    assert status.success?, out
    rows = result("flow.csv").lines.drop(2).map { |l| l.split(",").first(3).join(",") }
    assert_equal ["unlimited,2,400", "limited-hot,2,300"], rows
    assert_match(/^\*\*Note\.\*\* shared host$/, result("flow.md"))
  end

  def test_a_bad_setting_fails_before_anything_runs
    out, status = run_benchmark("flow.rb", "BENCH_CLIENTS" => "sidekiq")
    refute status.success?
    assert_match(/BENCH_CLIENTS: unknown sidekiq \(choose from solid-jobs\)/, out)
  end
end
