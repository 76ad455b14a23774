# frozen_string_literal: true

require_relative "test_helper"
require_relative "support/benchmark_smoke"

# benchmark/comparison.rb and stress.rb at tiny sizes, so they cannot rot:
# each ran to completion, printed its tables and wrote its files.
class ComparisonSmokeTest < Minitest::Test
  include BenchmarkSmoke

  def gnuplot? = system("gnuplot", "--version", out: File::NULL, err: File::NULL)

  def test_comparison_harness_runs
    out, status = run_benchmark("comparison.rb")
    assert status.success?, out
    assert_match(/^\| 1 \| sidekiq\s+\|/, out)
    assert_match(/^\| 1 \| solid-jobs-engine\s+\|/, out)
    assert_match(/^- (PASS|MISS) +noop at c=1/, out)
    assert_match(/^## Results/, result("comparison.md"))
    assert_match(/^noop,1,solid-jobs,/, result("comparison.csv"))
    assert File.exist?(File.join(output_dir, "comparison-noop.png")), out if gnuplot?
  end

  def test_comparison_takes_its_lists_from_the_environment
    out, status = run_benchmark("comparison.rb", "BENCH_CLIENTS" => "solid-jobs", "BENCH_SCENARIOS" => "noop",
                                                 "BENCH_CONCURRENCY" => "2", "BENCH_JOBS" => "noop=500")
    assert status.success?, out
    rows = result("comparison.csv").lines.grep(/^noop/).map { |l| l.split(",").first(4).join(",") }
    assert_equal ["noop,2,solid-jobs,500"], rows
  end

  def test_a_bad_setting_fails_before_anything_runs
    out, status = run_benchmark("comparison.rb", "BENCH_CLIENTS" => "sidekiq,resque")
    refute status.success?
    assert_match(/BENCH_CLIENTS: unknown resque \(choose from sidekiq, sidekiq-procs, solid-jobs/, out)
  end

  def test_stress_harness_runs
    out, status = run_benchmark("stress.rb")
    assert status.success?, out
    assert_match(/^\| noop\s+\| 2 \| solid-jobs\s+\|/, out)
    assert_match(/^PASS  all/, out)
    assert_match(/^noop,2,solid-jobs,1,200,200,0,/, result("stress.csv"))
  end
end
