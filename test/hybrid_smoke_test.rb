# frozen_string_literal: true

require_relative "test_helper"
require_relative "support/benchmark_smoke"

# benchmark/hybrid.rb at tiny sizes, so it cannot rot: it ran every mode on
# both paths and printed its table.
class HybridSmokeTest < Minitest::Test
  include BenchmarkSmoke

  def test_hybrid_benchmark_runs_every_mode_on_both_paths
    out, status = run_benchmark("hybrid.rb")
    assert status.success?, out
    %w[transport sustained burst].each do |mode|
      assert_match(/\| #{mode}\s+\| ractor\s+\|/, out)
      assert_match(/\| #{mode}\s+\| warm\s+\|/, out)
    end
    data = JSON.parse(result("hybrid.json"))
    assert_equal 6, data["results"].size
    warm = data["results"].select { |r| r["path"] == "warm" }
    assert(warm.all? { |r| r["ipc_roundtrip_ms"]["p50"] })
    assert_match(/\| burst/, result("hybrid.md"))
  end
end
