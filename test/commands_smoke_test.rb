# frozen_string_literal: true

require_relative "test_helper"
require_relative "support/benchmark_smoke"

# benchmark/commands.rb in smoke mode, so it cannot rot: it ran and printed
# its tables. The figures themselves are asserted by command_counts_test.rb.
class CommandsSmokeTest < Minitest::Test
  include BenchmarkSmoke

  def test_commands_harness_runs
    out, status = run_benchmark("commands.rb", "BENCH_OUTPUT_DIR" => nil)
    assert status.success?, out
    assert_match(/\| Operation\s+\| SolidJobs sent/, out)
    assert_match(/\| worker turn/, out)
    assert_match(/Sidekiq 6\.4\.1, for reference/, out)
    refute_match(/Wrote /, out, "a smoke run without BENCH_OUTPUT_DIR must not write the results file")
  end
end
