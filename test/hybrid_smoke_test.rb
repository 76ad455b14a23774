# frozen_string_literal: true

require_relative "test_helper"
require_relative "support/benchmark_smoke"

# `rake hybrid` at tiny sizes (BENCH_SMOKE=1), so it cannot rot. Outcomes
# only: it ran every mode on both paths and printed its table; no figure is
# asserted.
class HybridSmokeTest < Minitest::Test
  include BenchmarkSmoke

  def test_hybrid_benchmark_runs_every_mode_on_both_paths
    results = output_dir
    out, status = run_benchmark("hybrid.rb", SMOKE_ENV.merge("HYBRID_RESULTS_DIR" => results))
    assert status.success?, out
    %w[transport sustained burst].each do |mode|
      assert_match(/\| #{mode}\s+\| ractor\s+\|/, out)
      assert_match(/\| #{mode}\s+\| warm\s+\|/, out)
    end
    data = JSON.parse(File.read(File.join(results, "hybrid.json")))
    assert_equal 6, data["results"].size
    assert data["results"].select { |r| r["path"] == "warm" }.all? { |r| r["ipc_roundtrip_ms"]["p50"] }
    assert File.exist?(File.join(results, "hybrid.md"))
  end
end
