# frozen_string_literal: true

require_relative "test_helper"
require_relative "support/benchmark_smoke"

# benchmark/nodes.rb at tiny sizes (N = 1, 3; 2 s phases), so it cannot rot.
# It builds crates/solid_core/examples/node_scaling with cargo first (a
# no-op once built). Outcomes only, plus the one figure that holds by
# construction: no node ran a job from a channel it does not serve.
class BenchmarkNodesSmokeTest < Minitest::Test
  include BenchmarkSmoke

  def test_nodes_harness_runs
    out, status = run_benchmark("nodes.rb")
    assert status.success?, out
    assert_match(/^\*\*idle\*\*/, out)
    assert_match(/^\*\*load\*\*/, out)
    assert_match(/^\| 3 +\|.*\| 0 +\|$/, out)
    %w[md csv].each { |ext| assert File.size?(File.join(output_dir, "nodes.#{ext}")), "nodes.#{ext} was not written" }
  end
end
