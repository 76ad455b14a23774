# frozen_string_literal: true

require_relative "markdown"

module Bench
  # One measured (or failed) case: a system draining one workload.
  Result = Struct.new(:system, :workload, :concurrency, :jobs, :seconds, :commands, :error, keyword_init: true) do
    def ok? = error.nil?
    def jobs_per_second = jobs / seconds
    def commands_per_job = commands.values.sum.fdiv(jobs)
  end

  # Turns results into the Markdown table and the target checks.
  class Report
    SYSTEMS = %i[sidekiq solid_jobs].freeze
    NOOP_RATIO_TARGET = 5.0
    CPU_SCALING_TARGET = 1.7

    def initialize(results)
      @results = results
    end

    def table
      rows = cases.map do |workload, concurrency|
        sidekiq, solid = SYSTEMS.map { |system| find(system, workload, concurrency) }
        [workload, concurrency, rate(sidekiq), rate(solid), ratio(solid, sidekiq), per_job(sidekiq), per_job(solid)]
      end
      Markdown.table(["Workload", "Concurrency", "Sidekiq jobs/s", "SolidJobs jobs/s", "SolidJobs/Sidekiq",
                      "Sidekiq cmds/job", "SolidJobs cmds/job"], rows)
    end

    # Lines like "PASS  no-op ... ". A check that could not be evaluated
    # (failed or skipped case) is reported as n/a, not as a MISS.
    def target_lines
      noop_lines = concurrencies.map { |c| noop_ratio_line(c) }
      noop_lines + [cpu_scaling_line]
    end

    # The busiest commands of each case, per job: where the calls go.
    def command_mix(top = 6)
      @results.select(&:ok?).map do |r|
        per_job = r.commands.transform_values { |calls| calls.fdiv(r.jobs) }.select { |_, n| n >= 0.005 }
        mix = per_job.sort_by { |_, n| -n }.first(top).map { |name, n| format("%s %.2f", name, n) }
        "- #{label(r.system)} #{r.workload} c=#{r.concurrency}: #{mix.join(", ")}"
      end
    end

    private

    def cases = @results.map { |r| [r.workload, r.concurrency] }.uniq
    def concurrencies = @results.map(&:concurrency).uniq.sort

    def find(system, workload, concurrency)
      @results.find { |r| r.system == system && r.workload == workload && r.concurrency == concurrency }
    end

    def rate(result)
      return "n/a" unless result
      return "error" unless result.ok?

      format("%.0f", result.jobs_per_second)
    end

    def ratio(numerator, denominator)
      value = ratio_value(numerator, denominator)
      value ? format("%.2fx", value) : "n/a"
    end

    def ratio_value(numerator, denominator)
      return nil unless numerator&.ok? && denominator&.ok?

      numerator.jobs_per_second / denominator.jobs_per_second
    end

    def per_job(result)
      result&.ok? ? format("%.2f", result.commands_per_job) : "n/a"
    end

    def noop_ratio_line(concurrency)
      value = ratio_value(find(:solid_jobs, "noop", concurrency), find(:sidekiq, "noop", concurrency))
      check(value, NOOP_RATIO_TARGET, "no-op throughput at concurrency #{concurrency}: SolidJobs/Sidekiq")
    end

    def cpu_scaling_line
      value = ratio_value(find(:solid_jobs, "cpu", 2), find(:solid_jobs, "cpu", 1))
      check(value, CPU_SCALING_TARGET, "SolidJobs CPU-bound scaling: concurrency 2 / concurrency 1")
    end

    def check(value, target, what)
      return "n/a   #{what} (needs both cases measured)" unless value

      status = value >= target ? "PASS" : "MISS"
      format("%-5s %s = %.2fx (target >= %.1fx)", status, what, value, target)
    end

    def label(system) = system == :sidekiq ? "Sidekiq" : "SolidJobs"
  end
end
