# frozen_string_literal: true

require_relative "test_helper"
require_relative "support/benchmark_smoke"

# benchmark/soak.rb in its smoke mode (6 s, 1 s samples) against both
# backends, and the rake task's opt-in guard. Outcomes only: the soak ran,
# accounted for every job and printed its tables; no figure is asserted
# (a smoke run is too short for its memory verdicts, which say n/a).
class SoakSmokeTest < Minitest::Test
  include BenchmarkSmoke

  def test_soak_runs_and_writes_results
    dir = output_dir
    env = {"SOLID_JOBS_SOAK_SMOKE" => "1", "SOLID_JOBS_SOAK_BACKENDS" => "redis,engine",
           "SOLID_JOBS_SOAK_OUTPUT_DIR" => dir, "SOLID_JOBS_LOG_LEVEL" => "warn"}
    out, status = run_benchmark("soak.rb", env)
    assert status.success?, out
    ["SolidJobs on Redis", "SolidJobs on SolidEngine"].each do |label|
      assert_match(/^## #{label}$/, out)
      assert_match(/^- PASS +#{label} jobs: /, out)
    end
    assert_match(/^\| t \(s\) +\| Enqueued/, out)
    assert_match(/^\| Worker RSS +\|/, out)
    assert_match(/^## SolidJobs on Redis/, File.read(File.join(dir, "soak.md")))
    assert_match(/\Abackend,elapsed_s,/, File.read(File.join(dir, "soak.csv")))
  end

  def test_rake_soak_is_off_unless_enabled
    out, status = Open3.capture2e({"SOLID_JOBS_SOAK" => nil}, "rake", "soak", chdir: ROOT)
    assert status.success?, out
    assert_match(/SOLID_JOBS_SOAK=1/, out)
  end

  def test_bad_setting_fails_with_a_message
    env = {"SOLID_JOBS_SOAK_SECONDS" => "ten"}
    out, status = run_benchmark("soak.rb", env)
    refute status.success?
    assert_match(/SOLID_JOBS_SOAK_SECONDS must be a positive integer/, out)
  end
end
