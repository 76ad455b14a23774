# frozen_string_literal: true

require_relative "test_helper"
require_relative "support/benchmark_smoke"

# benchmark/comparison.rb and stress.rb at tiny sizes, so they cannot rot.
# Outcomes only: each ran to completion, printed its tables and wrote its
# files into the temporary output directory; no figure is asserted.
class ComparisonSmokeTest < Minitest::Test
  include BenchmarkSmoke

  def run_harness(script) = run_benchmark(script, SMOKE_ENV.merge("BENCH_OUTPUT_DIR" => output_dir))

  def gnuplot? = system("gnuplot", "--version", out: File::NULL, err: File::NULL)

  def test_comparison_harness_runs
    out, status = run_harness("comparison.rb")
    assert status.success?, out
    assert_match(/^\| 1 \| sidekiq\s+\|/, out)
    assert_match(/^\| 1 \| solid-jobs-engine\s+\|/, out)
    assert_match(/^(PASS|MISS) +noop at c=1/, out)
    assert File.exist?(File.join(output_dir, "comparison.md")), out
    assert_match(/^noop,1,solid-jobs,/, File.read(File.join(output_dir, "comparison.csv")))
    assert File.exist?(File.join(output_dir, "comparison-noop.png")), out if gnuplot?
  end

  def test_stress_harness_runs
    out, status = run_harness("stress.rb")
    assert status.success?, out
    assert_match(/^\| noop\s+\| 2 \| solid-jobs\s+\|/, out)
    assert_match(/^PASS  all/, out)
    %w[stress.md stress.csv].each { |name| assert File.exist?(File.join(output_dir, name)), out }
  end
end
