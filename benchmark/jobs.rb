# frozen_string_literal: true

# Jobs for benchmark/throughput.rb, loaded three ways:
#
#   * by `sidekiq -r ./benchmark/jobs.rb`      -> Sidekiq workers only
#   * by `solid-jobs --require ./benchmark/jobs.rb` -> SolidJobs tasks only
#   * by throughput.rb itself (both libraries loaded) -> both, to enqueue
#
# The solid-jobs CLI loads solid_jobs before this file, so a process without
# SolidJobs is the Sidekiq one; each worker process then loads only its own
# library and the comparison is not skewed by the other's code.
#
# The checks look for SolidJobs::Task, not SolidJobs: under Bundler the
# gemspec loads solid_jobs/version, so `SolidJobs` exists in every process,
# the Sidekiq one included.

require_relative "support/cpu_work"

require "sidekiq" unless defined?(SolidJobs::Task)

if defined?(Sidekiq)
  # Sidekiq logs every job at INFO; at 20k jobs that is a benchmark of the
  # logger, not of the job system.
  Sidekiq.configure_server { |config| config.logger.level = Logger::WARN }
  # Sidekiq 6.4.1 passes BRPOP's timeout positionally, and redis-rb 4.8
  # (Debian pairs the two) prints a two-line deprecation warning on every
  # fetch, i.e. on every job, and another on every push (SADD's return
  # type). Writing them out would slow Sidekiq down for a reason that has
  # nothing to do with its design, and bury the benchmark's output.
  Redis.silence_deprecations = true

  class SidekiqNoop
    include Sidekiq::Worker
    sidekiq_options queue: "bench", retry: false

    def perform(_n); end
  end

  class SidekiqCpu
    include Sidekiq::Worker
    sidekiq_options queue: "bench", retry: false

    def perform(iterations)
      BenchCpu.spin(iterations)
    end
  end
end

if defined?(SolidJobs::Task)
  class SolidNoop
    include SolidJobs::Task
    task_options channel: "bench"

    def execute_task(_n) = nil
  end

  class SolidCpu
    include SolidJobs::Task
    task_options channel: "bench"

    def execute_task(iterations) = BenchCpu.spin(iterations)
  end
end
