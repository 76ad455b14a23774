# frozen_string_literal: true

require_relative "markdown"
require_relative "report"

module Bench
  # One load-generator run against a fresh server in one durability mode.
  LoadGenResult = Struct.new(:durability, :jobs, :push_rate, :rate, :seconds, :error, keyword_init: true) do
    def ok? = error.nil?
    def jobs_per_second = rate
  end

  # The tables and target checks of benchmark/engine.rb. End-to-end cases
  # are Results (report.rb) whose system is :engine or :redis.
  class EngineReport
    LOADGEN_TARGET = 100_000
    E2E_RATIO_TARGET = 1.0

    def initialize(load_results, e2e_results)
      @load = load_results
      @e2e = e2e_results
    end

    def load_generator_table
      rows = @load.map do |r|
        [r.durability, delimit(r.jobs), r.ok? ? delimit(r.push_rate) : "error", r.ok? ? delimit(r.rate) : "error",
         r.ok? ? format("%.3f", r.seconds) : "n/a"]
      end
      Markdown.table(["Durability", "Jobs", "Push jobs/s", "Push+fetch+ack jobs/s", "Seconds"], rows)
    end

    def e2e_table
      rows = concurrencies.map do |c|
        engine, redis = find(:engine, c), find(:redis, c)
        [c, delimit((engine || redis).jobs), rate(engine), rate(redis), ratio_text(engine, redis)]
      end
      Markdown.table(["Concurrency", "Jobs", "SolidEngine jobs/s", "Redis jobs/s", "SolidEngine/Redis"], rows)
    end

    # "PASS ...", "MISS ..." or "n/a ..." (a case that failed or was not
    # run is not a miss).
    def target_lines
      [loadgen_line, *concurrencies.map { |c| e2e_line(c) }]
    end

    private

    def concurrencies = @e2e.map(&:concurrency).uniq.sort
    def find(system, concurrency) = @e2e.find { |r| r.system == system && r.concurrency == concurrency }

    def loadgen_line
      memory = @load.find { |r| r.durability == "memory" }
      what = "load generator, memory durability (push+fetch+ack)"
      return "n/a   #{what} (not measured)" unless memory&.ok?

      status = memory.rate >= LOADGEN_TARGET ? "PASS" : "MISS"
      "#{status.ljust(5)} #{what} = #{delimit(memory.rate)} jobs/s (target >= #{delimit(LOADGEN_TARGET)})"
    end

    def e2e_line(concurrency)
      value = ratio(find(:engine, concurrency), find(:redis, concurrency))
      what = "Ruby end to end at concurrency #{concurrency}: SolidEngine/Redis"
      return "n/a   #{what} (needs both cases measured)" unless value

      status = value >= E2E_RATIO_TARGET ? "PASS" : "MISS"
      format("%-5s %s = %.2fx (target >= %.1fx)", status, what, value, E2E_RATIO_TARGET)
    end

    def rate(result)
      return "n/a" unless result
      return "error" unless result.ok?

      delimit(result.jobs_per_second)
    end

    def ratio(numerator, denominator)
      return nil unless numerator&.ok? && denominator&.ok?

      numerator.jobs_per_second / denominator.jobs_per_second
    end

    def ratio_text(numerator, denominator)
      value = ratio(numerator, denominator)
      value ? format("%.2fx", value) : "n/a"
    end

    # 123456.7 -> "123,457"
    def delimit(number)
      number.round.to_s.reverse.scan(/\d{1,3}/).join(",").reverse
    end
  end
end
