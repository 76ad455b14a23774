# frozen_string_literal: true

# The no-op jobs of benchmark/enqueue.rb (producer only, no worker) and
# benchmark/idle.rb (a worker processes a few, then sits idle), loaded three
# ways, like benchmark/jobs.rb:
#
#   * by `sidekiq -r ./benchmark/enqueue_idle_jobs.rb`        -> Sidekiq job only
#   * by `solid-jobs --require ./benchmark/enqueue_idle_jobs.rb` -> SolidJobs task only
#   * by the harnesses themselves (both libraries loaded)     -> both, to enqueue
#
# The check looks for SolidJobs::Task, not SolidJobs: under Bundler the
# gemspec loads solid_jobs/version, so `SolidJobs` exists in every process.

require "sidekiq" unless defined?(SolidJobs::Task)

if defined?(Sidekiq)
  # Per-job INFO logging would make the warm-up jobs a benchmark of the logger.
  Sidekiq.configure_server { |config| config.logger.level = Logger::WARN }
  # Sidekiq 6.4.1 + redis-rb 4.8 (Debian pairs them) warn on every BRPOP and
  # on every push's SADD; printing those would slow Sidekiq for reasons
  # unrelated to its design.
  Redis.silence_deprecations = true

  class NoopSidekiqJob
    include Sidekiq::Worker
    sidekiq_options queue: "bench", retry: false

    def perform(_n); end
  end
end

if defined?(SolidJobs::Task)
  class NoopSolidTask
    include SolidJobs::Task
    task_options channel: "bench"

    def execute_task(_n) = nil
  end
end
