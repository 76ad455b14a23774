# frozen_string_literal: true

# Jobs of benchmark/latency.rb and benchmark/soak.rb. Each one records its
# start in the start log (support/start_log.rb) before doing anything else.
# Loaded by:
#
#   solid-jobs --require ./benchmark/latency_jobs.rb        SolidJobs on Redis
#   the same with SOLID_JOBS_BENCH_ENGINE_URL set           SolidJobs on SolidEngine
#   sidekiq -r ./benchmark/latency_jobs.rb                  Sidekiq
#   the harnesses themselves                                to enqueue
#
# benchmark/jobs.rb does the per-library setup (which library a process
# loads, Sidekiq's logger and redis-rb's deprecation warnings), and
# benchmark/engine_jobs.rb points SolidJobs at the engine, so neither is
# repeated here.

require_relative "jobs"
require_relative "engine_jobs" if ENV["SOLID_JOBS_BENCH_ENGINE_URL"]
require_relative "support/start_log"
require_relative "support/cpu_work"

# Read here, at load time in the main Ractor, into a frozen constant: the
# worker Ractors read the constant, never ENV. Nil in the harness processes,
# which only enqueue.
LATENCY_START_LOG = ENV[Bench::StartLog::ENV_NAME]&.freeze

if defined?(Sidekiq)
  class SidekiqLatency
    include Sidekiq::Worker
    sidekiq_options queue: "bench", retry: false

    def perform(enqueued_ns) = Bench::StartLog.record(LATENCY_START_LOG, enqueued_ns)
  end
end

if defined?(SolidJobs::Task)
  # The empty job: what benchmark/latency.rb measures, and most of the soak.
  class SolidLatency
    include SolidJobs::Task
    task_options channel: "bench"

    def execute_task(enqueued_ns) = Bench::StartLog.record(LATENCY_START_LOG, enqueued_ns)
  end

  # A short CPU burst (tens of microseconds), part of the soak's mix.
  class SolidLatencyCpu
    include SolidJobs::Task
    task_options channel: "bench"

    def execute_task(enqueued_ns, iterations)
      Bench::StartLog.record(LATENCY_START_LOG, enqueued_ns)
      BenchCpu.spin(iterations)
    end
  end

  # Nested arguments, part of the soak's mix: they are converted to Ruby
  # objects in the worker, so a leak on that path would show in its RSS.
  class SolidLatencyPayload
    include SolidJobs::Task
    task_options channel: "bench"

    def execute_task(enqueued_ns, payload)
      Bench::StartLog.record(LATENCY_START_LOG, enqueued_ns)
      payload.fetch("tags").size + payload.fetch("note").size
    end
  end
end
