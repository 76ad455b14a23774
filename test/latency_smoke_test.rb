# frozen_string_literal: true

require_relative "test_helper"
require_relative "support/benchmark_smoke"

# benchmark/latency.rb at tiny size (BENCH_SMOKE=1), so it cannot rot.
# Outcomes only: it ran to completion, printed its table and target lines,
# and wrote its results files where told; no figure is asserted.
class LatencySmokeTest < Minitest::Test
  include BenchmarkSmoke

  def test_latency_harness_runs_and_writes_results
    out, status = run_benchmark("latency.rb", SMOKE_ENV.merge("BENCH_OUTPUT_DIR" => output_dir))
    assert status.success?, out
    %w[SolidJobs\ on\ Redis SolidJobs\ on\ SolidEngine Sidekiq].each do |system|
      assert_match(/^\| #{system}\S*\s.*\| idle workers\s+\|/, out)
      assert_match(/^\| #{system}\S*\s.*\| after [\d.]+ s idle\s+\|/, out)
    end
    assert_match(/^- (PASS|MISS) +SolidJobs on Redis, idle workers/, out)
    assert_match(/^- (PASS|MISS) +SolidJobs on Redis, after [\d.]+ s idle/, out)
    assert_match(/\| idle workers/, File.read(File.join(output_dir, "latency.md")))
    assert_equal 7, File.readlines(File.join(output_dir, "latency.csv")).size # header + 3 systems x 2 phases
  end
end
