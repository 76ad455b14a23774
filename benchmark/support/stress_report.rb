# frozen_string_literal: true

require "csv"
require_relative "markdown"

module Bench
  # Tables and CSV of benchmark/stress.rb: per case, whether every job of
  # every run completed exactly once (by the ledger) with nothing failed,
  # lost or left behind. Rates are shown for orientation only.
  class StressReport
    CSV_HEADER = %w[scenario concurrency client runs jobs_per_run exactly_once errors error_detail jobs_per_s_median result].freeze

    def initialize(cases)
      @cases = cases
    end

    def table
      rows = sorted.map do |c|
        [c.scenario, c.concurrency, c.client, c.runs.size, c.jobs, exactly_once(c), c.error_count, c.error_text,
         c.measured? ? c.jobs_per_second.round : "n/a", verdict(c)]
      end
      Markdown.table(["Scenario", "c", "Client", "Runs", "Jobs/run", "Ran exactly once", "Errors", "Error detail", "jobs/s", "Result"], rows)
    end

    def csv
      CSV.generate do |out|
        out << CSV_HEADER
        sorted.each do |c|
          out << [c.scenario, c.concurrency, c.client, c.runs.size, c.jobs, c.runs.sum { |r| r.exactly_once || 0 }, c.error_count,
                  c.error_text, c.measured? ? c.jobs_per_second.round(1) : nil, verdict(c)]
        end
      end
    end

    def summary
      failed = @cases.reject(&:ok?)
      runs = @cases.sum { |c| c.runs.size }
      jobs = @cases.sum { |c| c.runs.size * c.jobs }
      return "PASS  all #{runs} runs (#{jobs} jobs): every job completed exactly once, none failed, every worker stopped cleanly" if failed.empty?

      "FAIL  #{failed.size} of #{@cases.size} cases had errors: #{failed.map { |c| "#{c.scenario} c=#{c.concurrency} #{c.client}" }.join(", ")}"
    end

    private

    def sorted = @cases.sort_by { |c| [c.scenario, c.concurrency, c.client] }
    def verdict(result) = result.ok? ? "OK" : "**FAIL**"

    # "10000/10000" summed over runs.
    def exactly_once(result) = "#{result.runs.sum { |r| r.exactly_once || 0 }}/#{result.runs.size * result.jobs}"
  end
end
