# frozen_string_literal: true

require_relative "test_helper"
require_relative "support/benchmark_smoke"

# benchmark/engine.rb at tiny size, so it cannot rot.
class EngineSmokeTest < Minitest::Test
  include BenchmarkSmoke

  def test_engine_harness_runs_every_durability_mode
    out, status = run_benchmark("engine.rb")
    assert status.success?, out
    %w[memory balanced strict].each { |mode| assert_match(/^\| #{mode}\s+\| 2,000\s+\|/, out) }
    assert_match(/^- (PASS|MISS) +load generator, memory durability/, out)
    assert_match(/^\| memory/, result("engine.md"))
    # The compaction phase: latency of the probe's operations that overlapped a compaction.
    assert_match(/^\| during compaction +\| [\d,]+ +\| [\d.]+ +\| [\d.]+ +\| [\d.]+ +\|/, out)
  end
end
