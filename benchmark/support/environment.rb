# frozen_string_literal: true

require "etc"

module Bench
  # Facts about the host for the header of a results file: numbers from a
  # shared 2-core VM mean little without them.
  module Environment
    ROOT = File.expand_path("../..", __dir__)
    # The code a benchmark measures; the benchmark's own files are not in it.
    MEASURED_PATHS = %w[crates ext lib exe Cargo.toml Cargo.lock].freeze

    module_function

    def cpu_model
      line = File.foreach("/proc/cpuinfo").find { |l| l.start_with?("model name") }
      line ? line.split(":", 2).last.strip : "unknown"
    rescue SystemCallError
      "unknown"
    end

    def nproc = Etc.nprocessors
    def ruby = "#{RUBY_VERSION}p#{RUBY_PATCHLEVEL}"

    # Other work on a small host skews every number; record how busy it was.
    def load_average
      File.read("/proc/loadavg").split.first(3).join(" ")
    rescue SystemCallError
      "unknown"
    end

    def git_commit
      commit = IO.popen(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], err: File::NULL, &:read).strip
      commit.empty? ? "unknown" : commit
    rescue SystemCallError
      "unknown"
    end

    # True when the measured code differs from HEAD (other work in progress
    # in this checkout), so the commit alone does not identify what ran.
    def code_modified?
      status = IO.popen(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no", "--", *MEASURED_PATHS],
                        err: File::NULL, &:read)
      !status.strip.empty?
    rescue SystemCallError
      false
    end
  end
end
