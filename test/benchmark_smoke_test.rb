# frozen_string_literal: true

require_relative "test_helper"
require_relative "support/benchmark_smoke"

# The benchmark harnesses at tiny sizes, so they cannot rot. Outcomes only:
# they ran to completion and printed their tables; no figure is asserted.
class BenchmarkSmokeTest < Minitest::Test
  include BenchmarkSmoke

  def test_throughput_harness_runs
    out, status = run_benchmark("throughput.rb")
    assert status.success?, out
    assert_match(/\| noop\s+\| 1\s+\|/, out)
  end

  def test_engine_harness_runs
    out, status = run_benchmark("engine.rb")
    assert status.success?, out
    assert_match(/memory/, out)
    assert_match(/SolidEngine\/Redis/, out)
  end
end
