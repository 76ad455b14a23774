# frozen_string_literal: true

require_relative "test_helper"
require_relative "support/benchmark_smoke"

# benchmark/latency.rb at tiny size, so it cannot rot: it ran to
# completion, printed its table and target lines, and wrote its results.
class LatencySmokeTest < Minitest::Test
  include BenchmarkSmoke

  def test_latency_harness_runs_and_writes_results
    out, status = run_benchmark("latency.rb")
    assert status.success?, out
    ["SolidJobs on Redis", "SolidJobs on SolidEngine", "Sidekiq"].each do |system|
      assert_match(/^\| #{system}[^|]*\| 2 +\| idle workers\s+\|/, out)
      assert_match(/^\| #{system}[^|]*\| 2 +\| after [\d.]+ s idle\s+\|/, out)
    end
    assert_match(/^- (PASS|MISS) +SolidJobs on Redis \(Ractors\), idle workers/, out)
    assert_match(/^- (PASS|MISS) +SolidJobs on Redis \(Ractors\), after [\d.]+ s idle/, out)
    assert_match(/\| idle workers/, result("latency.md"))
    assert_equal 6, result("latency.csv").lines.grep(/^(solid-jobs|sidekiq)/).size # 3 systems x 2 phases
  end
end
