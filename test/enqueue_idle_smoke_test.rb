# frozen_string_literal: true

require_relative "test_helper"
require_relative "support/benchmark_smoke"

# benchmark/enqueue.rb and benchmark/idle.rb at tiny sizes, so they cannot
# rot. Outcomes only: each ran to completion, printed its tables and target
# lines, and wrote its results files (to a temporary directory, never over
# the committed ones); no figure is asserted.
class EnqueueIdleSmokeTest < Minitest::Test
  include BenchmarkSmoke

  def test_enqueue_harness_runs
    out, status = run_benchmark("enqueue.rb")
    assert status.success?, out
    assert_match(/\| single\s+\| 1\s+\| 1\s+\|/, out)
    assert_match(/\| bulk\s+\| 100\s+\| 2\s+\|/, out)
    assert_match(/PING round trips at 1 producer/, out)
    assert_match(/^- (PASS|MISS)\s+single enqueue at 1 producer/, out)
    assert_results_written("enqueue")
  end

  def test_idle_harness_runs
    out, status = run_benchmark("idle.rb")
    assert status.success?, out
    assert_match(/\| Sidekiq\s+\| 8\s+\|/, out)
    assert_match(/\| SolidJobs\s+\| 8\s+\|/, out)
    assert_match(/^- (PASS|MISS)\s+idle worker CPU/, out)
    assert_match(/^- (PASS|MISS)\s+SolidJobs idle Redis commands beyond the heartbeat/, out)
    assert_results_written("idle")
  end

  private

  def assert_results_written(name)
    %w[md csv].each do |ext|
      path = File.join(output_dir, "#{name}.#{ext}")
      assert File.size?(path), "#{path} was not written"
    end
  end
end
