# frozen_string_literal: true

require "fileutils"
require_relative "environment"

module Bench
  # The environment line that heads comparison and stress results, and the
  # atomic write of a results file.
  module RunHeader
    module_function

    def environment_line(load_at_start)
      "CPU: #{Environment.cpu_model} | nproc: #{Environment.nproc} | Ruby: #{Environment.ruby} | Redis: #{redis_version} | " \
        "commit: #{Environment.git_commit}#{"+modified" if Environment.code_modified?} | Sidekiq: #{sidekiq_version} | " \
        "SolidJobs: #{SolidJobs::VERSION} | load average at start: #{load_at_start}, at end: #{Environment.load_average}"
    end

    # "Redis server v=7.0.15 sha=..." -> "7.0.15"
    def redis_version
      IO.popen(["redis-server", "--version"], err: File::NULL, &:read)[/v=(\S+)/, 1] || "unknown"
    rescue SystemCallError
      "unknown"
    end

    def sidekiq_version = defined?(Sidekiq::VERSION) ? Sidekiq::VERSION : "not loaded"

    # Readers never see a half-written file.
    def write(path, content)
      FileUtils.mkdir_p(File.dirname(path))
      File.write("#{path}.tmp", content)
      File.rename("#{path}.tmp", path)
    end
  end
end
