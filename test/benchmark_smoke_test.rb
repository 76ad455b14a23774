# frozen_string_literal: true

require_relative "test_helper"
require "open3"

# The benchmark harnesses at tiny sizes, so they cannot rot. Outcomes only:
# they ran to completion and printed their tables; no figure is asserted.
class BenchmarkSmokeTest < Minitest::Test
  ROOT = File.expand_path("..", __dir__)

  def run_harness(script)
    env = {"BENCH_SMOKE" => "1", "SOLID_JOBS_LOG_LEVEL" => "warn"}
    Open3.capture2e(env, RbConfig.ruby, "-I#{ROOT}/lib", File.join(ROOT, "benchmark", script), chdir: ROOT)
  end

  def test_throughput_harness_runs
    out, status = run_harness("throughput.rb")
    assert status.success?, out
    assert_match(/\| noop\s+\| 1\s+\|/, out)
  end

  def test_engine_harness_runs
    out, status = run_harness("engine.rb")
    assert status.success?, out
    assert_match(/memory/, out)
    assert_match(/SolidEngine\/Redis/, out)
  end
end
