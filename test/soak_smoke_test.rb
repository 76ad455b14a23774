# frozen_string_literal: true

require_relative "test_helper"
require_relative "support/benchmark_smoke"

# benchmark/soak.rb in its smoke mode (6 s, 1 s samples) against both
# backends. Outcomes only: the soak ran, accounted for every job and printed
# its tables (a smoke run is too short for its memory verdicts, which say
# n/a).
class SoakSmokeTest < Minitest::Test
  include BenchmarkSmoke

  def test_soak_runs_and_writes_results
    out, status = run_benchmark("soak.rb", "BENCH_CLIENTS" => "solid-jobs,solid-jobs-engine")
    assert status.success?, out
    ["SolidJobs on Redis (Ractors), c=2", "SolidJobs on SolidEngine (Ractors), c=2"].each do |label|
      assert_match(/^## #{Regexp.escape(label)}$/, out)
      assert_match(/^- PASS +#{Regexp.escape(label)} jobs: /, out)
    end
    assert_match(/^\| t \(s\) +\| Enqueued/, out)
    assert_match(/^\| Worker RSS +\|/, out)
    assert_match(/^## SolidJobs on Redis/, result("soak.md"))
    assert_match(/^backend,concurrency,elapsed_s,/, result("soak.csv"))
  end

  def test_bad_setting_fails_with_a_message
    out, status = run_benchmark("soak.rb", "BENCH_SMOKE" => nil, "BENCH_SECONDS" => "ten")
    refute status.success?
    assert_match(/BENCH_SECONDS must be a positive integer/, out)
  end
end
