# frozen_string_literal: true

require "open3"
require "tmpdir"
require "fileutils"

# What the benchmark smoke tests share: running benchmark/<script> in a
# child Ruby at tiny sizes (BENCH_SMOKE=1), as `rake benchmark:<name>`
# would, writing its results into a temporary directory, so a smoke run
# never writes over the committed ones. Outcomes only: a harness ran to
# completion and printed its tables; no figure is asserted.
module BenchmarkSmoke
  ROOT = File.expand_path("../..", __dir__)

  # [combined stdout and stderr, Process::Status]. Warnings only, so a
  # failure's output stays readable; "BENCH_OUTPUT_DIR" => nil writes nothing.
  def run_benchmark(script, env = {})
    env = {"BENCH_SMOKE" => "1", "SOLID_JOBS_LOG_LEVEL" => "warn", "BENCH_OUTPUT_DIR" => output_dir}.merge(env)
    Open3.capture2e(env, RbConfig.ruby, "-I#{ROOT}/lib", File.join(ROOT, "benchmark", script), chdir: ROOT)
  end

  # Created on first use, removed after the test.
  def output_dir = @output_dir ||= Dir.mktmpdir("benchmark-smoke")
  def result(name) = File.read(File.join(output_dir, name))

  def teardown
    FileUtils.rm_rf(@output_dir) if @output_dir
    super
  end
end
