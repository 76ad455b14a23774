# frozen_string_literal: true

require_relative "test_helper"
require "open3"

# benchmark/commands.rb in smoke mode, so it cannot rot: it ran and printed
# its tables. The figures themselves are asserted by command_counts_test.rb.
class CommandsSmokeTest < Minitest::Test
  ROOT = File.expand_path("..", __dir__)

  def test_commands_harness_runs
    env = {"BENCH_SMOKE" => "1", "SOLID_JOBS_LOG_LEVEL" => "warn"}
    out, status = Open3.capture2e(env, RbConfig.ruby, "-I#{ROOT}/lib", File.join(ROOT, "benchmark/commands.rb"), chdir: ROOT)
    assert status.success?, out
    assert_match(/\| Operation\s+\| SolidJobs sent/, out)
    assert_match(/\| worker turn/, out)
    assert_match(/Sidekiq 6\.4\.1, for reference/, out)
    refute_match(/Wrote /, out, "a smoke run must not write the results file")
  end
end
