# frozen_string_literal: true

require "csv"
require_relative "markdown"
require_relative "comparison_clients"

module Bench
  # Tables, CSV and target checks of benchmark/comparison.rb, from
  # CaseResults (case_result.rb).
  class ComparisonReport
    NOOP_TARGET = 10.0
    CPU_SIDEKIQ_TARGET = 1.8
    CPU_PROCS_TARGET = 1.0
    IO_TARGET = 1.0
    MEMORY_TARGET = 1.0 / 3
    CPU_CONCURRENCY = 2
    LARGE_CONCURRENCY = 8

    CSV_HEADER = %w[scenario concurrency client jobs runs measured_runs jobs_per_s_median jobs_per_s_min jobs_per_s_max
                    drain_seconds worker_cpu_percent worker_cpu_s_per_1k_jobs server_cpu_s_per_1k_jobs peak_pss_mb
                    allocations_per_job redis_commands_per_job errors error_detail].freeze

    def initialize(cases)
      @cases = cases
    end

    def scenarios = @cases.map(&:scenario).uniq

    # One table per scenario: rows by concurrency, then client.
    def table(scenario)
      rows = @cases.select { |c| c.scenario == scenario }.sort_by { |c| [c.concurrency, client_order(c)] }.map { |c| row(c) }
      Markdown.table(["c", "Client", "jobs/s", "min–max", "vs sidekiq", "Worker CPU %", "Worker CPU-s/1k jobs",
                      "Server CPU-s/1k jobs", "Peak PSS MB", "Allocs/job", "Redis cmds/job", "Errors"], rows)
    end

    def csv
      CSV.generate do |out|
        out << CSV_HEADER
        @cases.each { |c| out << csv_row(c) }
      end
    end

    # "PASS ...", "MISS ..." or "n/a ..." (a case not run or not measured);
    # a case with errors cannot pass.
    def target_lines
      noop = concurrencies("noop").map do |c|
        ratio_line(find("solid-jobs", "noop", c), find("sidekiq", "noop", c), NOOP_TARGET, "noop at c=#{c}: solid-jobs / sidekiq jobs/s")
      end
      cpu = [["sidekiq", CPU_SIDEKIQ_TARGET], ["sidekiq-procs", CPU_PROCS_TARGET]].map do |other, target|
        ratio_line(find("solid-jobs", "process-cpu", CPU_CONCURRENCY), find(other, "process-cpu", CPU_CONCURRENCY), target,
                   "process-cpu at c=#{CPU_CONCURRENCY}: solid-jobs / #{other} jobs/s")
      end
      io = ratio_line(find("solid-jobs", "process-io", LARGE_CONCURRENCY), find("sidekiq", "process-io", LARGE_CONCURRENCY), IO_TARGET,
                      "process-io at c=#{LARGE_CONCURRENCY}: solid-jobs / sidekiq jobs/s")
      [*noop, *cpu, io, *memory_lines].compact
    end

    # Commands per job are per-case facts worth a note: engine clients
    # should send none.
    def notes
      engine = @cases.select { |c| !Clients.uses_redis?(c.client) && c.measured? }
      stray = engine.reject { |c| c.median_run.commands.empty? }
      return [] if engine.empty?

      [stray.empty? ? "SolidEngine clients sent no Redis commands in any case (their column reads 0)." :
        "SolidEngine clients sent Redis commands in: #{stray.map { |c| "#{c.scenario} c=#{c.concurrency} #{c.client}" }.join(", ")}."]
    end

    private

    def client_order(result) = Clients.names.index(result.client) || Clients.names.size
    def concurrencies(scenario) = @cases.select { |c| c.scenario == scenario }.map(&:concurrency).uniq.sort
    def find(client, scenario, concurrency) = @cases.find { |c| c.client == client && c.scenario == scenario && c.concurrency == concurrency }

    def row(result)
      run = result.median_run
      flag = result.ok? ? "0" : "**#{result.error_count}**: #{result.error_text}"
      return [result.concurrency, result.client, "not measured", "", "", "", "", "", "", "", "", flag] unless run

      [result.concurrency, result.client, delimit(result.jobs_per_second), spread(result), versus_sidekiq(result),
       format("%.0f", run.worker_cpu_percent), format("%.2f", run.worker_cpu_per_thousand), format("%.2f", run.server_cpu_per_thousand),
       format("%.1f", run.peak_pss_mb), run.allocations_per_job ? format("%.1f", run.allocations_per_job) : "n/a",
       commands(result, run), flag]
    end

    def csv_row(result)
      run = result.median_run
      measured = if run
                   [result.jobs_per_second.round(1), result.min_jobs_per_second.round(1), result.max_jobs_per_second.round(1),
                    run.seconds.round(4), run.worker_cpu_percent.round(1), run.worker_cpu_per_thousand.round(4),
                    run.server_cpu_per_thousand.round(4), run.peak_pss_mb.round(2), run.allocations_per_job&.round(2),
                    run.commands_per_job.round(4)]
                 else
                   Array.new(10)
                 end
      [result.scenario, result.concurrency, result.client, result.jobs, result.runs.size, result.measured_runs.size, *measured,
       result.error_count, result.error_text]
    end

    def spread(result)
      return "" if result.measured_runs.size < 2

      "#{delimit(result.min_jobs_per_second)}–#{delimit(result.max_jobs_per_second)}"
    end

    def versus_sidekiq(result)
      sidekiq = find("sidekiq", result.scenario, result.concurrency)
      return "" unless sidekiq&.measured? && result.client != "sidekiq"

      format("%.2fx", result.jobs_per_second / sidekiq.jobs_per_second)
    end

    def commands(result, run)
      value = format("%.2f", run.commands_per_job)
      Clients.uses_redis?(result.client) ? value : "#{value} (no Redis)"
    end

    def memory_lines
      scenarios.filter_map do |scenario|
        solid, procs = find("solid-jobs", scenario, LARGE_CONCURRENCY), find("sidekiq-procs", scenario, LARGE_CONCURRENCY)
        next unless solid || procs

        what = "peak memory (PSS, workers + servers) at c=#{LARGE_CONCURRENCY}, #{scenario}: solid-jobs / sidekiq-procs"
        next "n/a   #{what} (needs both cases measured)" unless solid&.measured? && procs&.measured?

        value = solid.median_run.peak_pss_kb.fdiv(procs.median_run.peak_pss_kb)
        verdict(value <= MEMORY_TARGET, [solid, procs], format("%s = %.2f (%.0f MB / %.0f MB; target <= 0.33)", what, value,
                                                               solid.median_run.peak_pss_mb, procs.median_run.peak_pss_mb))
      end
    end

    def ratio_line(numerator, denominator, target, what)
      return nil unless numerator || denominator
      return "n/a   #{what} (needs both cases measured)" unless numerator&.measured? && denominator&.measured?

      value = numerator.jobs_per_second / denominator.jobs_per_second
      verdict(value >= target, [numerator, denominator], format("%s = %.2fx (target >= %.1fx)", what, value, target))
    end

    def verdict(met, cases, text)
      errors = cases.reject(&:ok?)
      return "#{(met ? "PASS" : "MISS").ljust(5)} #{text}" if errors.empty?

      "MISS  #{text} -- not a pass: #{errors.map(&:client).join(" and ")} had errors"
    end

    # 123456.7 -> "123,457"
    def delimit(number)
      number.round.to_s.reverse.scan(/\d{1,3}/).join(",").reverse
    end
  end
end
