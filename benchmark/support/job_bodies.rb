# frozen_string_literal: true

require_relative "cpu_work"
require_relative "job_ledger"

module Bench
  # What a benchmark job does, shared by the Sidekiq workers and the
  # SolidJobs tasks of benchmark/jobs.rb so both systems run identical code.
  # `n` is the job's number (nil from callers that do not number jobs); it
  # only matters to the stress ledger.
  #
  # Nothing here touches mutable shared state, so it runs inside worker
  # Ractors unchanged.
  module JobBodies
    module_function

    def noop(n) = JobLedger.record(n)

    def cpu(iterations, n)
      BenchCpu.spin(iterations)
      JobLedger.record(n)
    end

    # Stands in for waiting on a database or an HTTP call: the worker is
    # blocked but uses no CPU.
    def io(seconds, n)
      sleep(seconds)
      JobLedger.record(n)
    end

    # Even-numbered jobs compute, odd-numbered ones wait, so a backlog
    # seeded in order alternates the two and every worker sees both.
    def mixed(iterations, seconds, n)
      n.even? ? cpu(iterations, n) : io(seconds, n)
    end
  end
end
