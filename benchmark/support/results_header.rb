# frozen_string_literal: true

require_relative "environment"

module Bench
  # The environment line at the top of a results file (and of its console
  # output): a figure from a shared 2-core VM means little without the host,
  # the versions and how busy the host was. The one place every harness's
  # header is built.
  module ResultsHeader
    # How the commit is marked when the measured code differs from HEAD.
    # Harnesses spell it differently; their published results keep each
    # spelling, so it is a parameter rather than one choice here.
    MODIFIED = " (measured code modified)"

    module_function

    # `redis_version`: of the server measured against (#redis_version for a
    # client, #redis_server_version when no server is up any more).
    # `sidekiq: false` leaves Sidekiq out (harnesses that do not run it);
    # `load_at_end: true` appends the load average now.
    def line(redis_version:, load_at_start:, modified: MODIFIED, sidekiq: true, load_at_end: false)
      fields = ["CPU: #{Environment.cpu_model}", "nproc: #{Environment.nproc}", "Ruby: #{Environment.ruby}",
                "Redis: #{redis_version}", "commit: #{commit(modified)}"]
      fields << "Sidekiq: #{sidekiq_version}" if sidekiq
      load = "load average at start: #{load_at_start}"
      load += ", at end: #{Environment.load_average}" if load_at_end
      [*fields, "SolidJobs: #{SolidJobs::VERSION}", load].join(" | ")
    end

    # The short HEAD commit, with `modified` appended when the measured code
    # differs from it (nil: never marked).
    def commit(modified = MODIFIED)
      commit = Environment.git_commit
      modified && Environment.code_modified? ? commit + modified : commit
    end

    def redis_version(redis) = redis.info("server")["redis_version"]

    # "Redis server v=7.0.15 sha=..." -> "7.0.15"
    def redis_server_version
      IO.popen(["redis-server", "--version"], err: File::NULL, &:read)[/v=(\S+)/, 1] || "unknown"
    rescue SystemCallError
      "unknown"
    end

    def sidekiq_version = defined?(Sidekiq::VERSION) ? Sidekiq::VERSION : "not loaded"
  end
end
