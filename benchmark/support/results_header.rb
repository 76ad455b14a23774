# frozen_string_literal: true

require_relative "environment"

module Bench
  # The environment line at the top of a results file (and of its console
  # output): a figure from a shared 2-core VM means little without the host,
  # the versions and how busy the host was.
  module ResultsHeader
    module_function

    def line(redis, load_at_start)
      commit = Environment.git_commit
      commit += " (measured code modified)" if Environment.code_modified?
      "CPU: #{Environment.cpu_model} | nproc: #{Environment.nproc} | Ruby: #{Environment.ruby} | " \
        "Redis: #{redis.info("server")["redis_version"]} | commit: #{commit} | Sidekiq: #{Sidekiq::VERSION} | " \
        "SolidJobs: #{SolidJobs::VERSION} | load average at start: #{load_at_start}"
    end
  end
end
