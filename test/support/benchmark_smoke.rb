# frozen_string_literal: true

require "open3"
require "tmpdir"
require "fileutils"

# What the benchmark smoke tests share: running benchmark/<script> in a
# child Ruby (as `ruby benchmark/<script>` would) and a temporary output
# directory, so a smoke run never writes over the committed results.
module BenchmarkSmoke
  ROOT = File.expand_path("../..", __dir__)
  # Tiny sizes; warnings only, so a failure's output stays readable.
  SMOKE_ENV = {"BENCH_SMOKE" => "1", "SOLID_JOBS_LOG_LEVEL" => "warn"}.freeze

  # [combined stdout and stderr, Process::Status]
  def run_benchmark(script, env = SMOKE_ENV)
    Open3.capture2e(env, RbConfig.ruby, "-I#{ROOT}/lib", File.join(ROOT, "benchmark", script), chdir: ROOT)
  end

  # Created on first use, removed after the test.
  def output_dir = @output_dir ||= Dir.mktmpdir("benchmark-smoke")

  def teardown
    FileUtils.rm_rf(@output_dir) if @output_dir
    super
  end
end
