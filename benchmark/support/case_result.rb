# frozen_string_literal: true

module Bench
  # One run of one case (client x scenario x concurrency). `exactly_once`
  # counts the jobs the ledger saw exactly once (stress only).
  # `errors` holds only non-zero counts, by kind ("failed", "lost", ...);
  # `failure` says why a run could not be measured at all.
  RunResult = Struct.new(:jobs, :seconds, :worker_cpu_seconds, :server_cpu_seconds, :peak_pss_kb, :allocations,
                         :commands, :exactly_once, :errors, :failure, keyword_init: true) do
    def measured? = failure.nil?
    def error_count = errors.values.sum + (measured? ? 0 : 1)
    def jobs_per_second = jobs / seconds
    # Of one core: 200 means two cores busy.
    def worker_cpu_percent = 100.0 * worker_cpu_seconds / seconds
    def worker_cpu_per_thousand = 1000.0 * worker_cpu_seconds / jobs
    def server_cpu_per_thousand = 1000.0 * server_cpu_seconds / jobs
    def peak_pss_mb = peak_pss_kb / 1024.0
    def allocations_per_job = allocations&.fdiv(jobs)
    def commands_per_job = commands.values.sum.fdiv(jobs)
  end

  # All repetitions of one case. Figures come from the median run (by
  # jobs/s), so every metric in a row belongs to the same run; the spread
  # of jobs/s over the runs is kept as min and max.
  class CaseResult
    attr_reader :client, :scenario, :concurrency, :jobs, :runs

    def initialize(client:, scenario:, concurrency:, jobs:)
      @client = client
      @scenario = scenario
      @concurrency = concurrency
      @jobs = jobs
      @runs = []
    end

    def <<(run)
      @runs << run
      self
    end

    def measured_runs = @runs.select(&:measured?)
    def measured? = !measured_runs.empty?
    def error_count = @runs.sum(&:error_count)
    def ok? = measured? && error_count.zero?

    def median_run
      sorted = measured_runs.sort_by(&:jobs_per_second)
      sorted[(sorted.size - 1) / 2]
    end

    def jobs_per_second
      rates = measured_runs.map(&:jobs_per_second).sort
      middle = rates.size / 2
      rates.size.odd? ? rates[middle] : (rates[middle - 1] + rates[middle]) / 2.0
    end

    def min_jobs_per_second = measured_runs.map(&:jobs_per_second).min
    def max_jobs_per_second = measured_runs.map(&:jobs_per_second).max

    # "run 2: 3 lost; run 3: not measured (...)"
    def error_text
      @runs.each_with_index.filter_map do |run, i|
        parts = run.errors.map { |kind, n| "#{n} #{kind}" }
        parts << "not measured (#{run.failure.lines.first.strip})" unless run.measured?
        next if parts.empty?

        @runs.size > 1 ? "run #{i + 1}: #{parts.join(", ")}" : parts.join(", ")
      end.join("; ")
    end
  end
end
