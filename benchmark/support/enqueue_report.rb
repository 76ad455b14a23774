# frozen_string_literal: true

require_relative "markdown"

module Bench
  # One timed enqueue run: `jobs` pushed by `concurrency` producer threads
  # of one system, in `mode` :single (one call per job) or :bulk (one call
  # per batch). `commands` are the Redis calls it caused (INFO
  # commandstats); `producer_cpu` and `redis_cpu` the CPU seconds the
  # benchmark process and redis-server used meanwhile, which show which side
  # limits a rate that stops growing with producers. `error` is set when
  # the run could not be counted.
  EnqueueRun = Struct.new(:mode, :concurrency, :system, :jobs, :seconds, :commands, :producer_cpu, :redis_cpu, :error,
                          keyword_init: true) do
    def ok? = error.nil?
    def jobs_per_second = jobs / seconds
    def commands_per_job = commands.values.sum.fdiv(jobs)
    def producer_cpu_percent = 100.0 * producer_cpu / seconds
    def redis_cpu_percent = 100.0 * redis_cpu / seconds
  end

  # The repetitions of one case, summarised by their median: on a shared
  # host a single slow or fast outlier should move neither the rate nor the
  # ratio.
  class EnqueueCase
    attr_reader :mode, :concurrency, :system, :runs

    def initialize(runs)
      @runs = runs
      @mode, @concurrency, @system = runs.first.to_h.values_at(:mode, :concurrency, :system)
    end

    def ok? = @runs.all?(&:ok?)
    def error = @runs.find { |r| !r.ok? }&.error
    def jobs = @runs.first.jobs
    def rates = @runs.map(&:jobs_per_second).sort
    def commands_per_job = median(@runs.map(&:commands_per_job))
    def jobs_per_second = median(rates)

    # The run at the middle of the rates (the lower of the two middles for
    # an even count), for figures that are not averaged across runs.
    def median_run = @runs.sort_by(&:jobs_per_second)[(@runs.size - 1) / 2]

    private

    def median(values)
      sorted = values.sort
      middle = sorted.size / 2
      sorted.size.odd? ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2.0
    end
  end

  # Tables, target checks and CSV rows of benchmark/enqueue.rb.
  class EnqueueReport
    TARGETS = {single: 2.0, bulk: 3.0}.freeze
    SIDEKIQ_CALL = {single: "push", bulk: "push_bulk"}.freeze
    CSV_HEADER = %w[mode batch concurrency system jobs_per_case runs median_jobs_per_s min_jobs_per_s max_jobs_per_s
                    redis_commands_per_job ratio_vs_sidekiq producer_cpu_percent redis_cpu_percent error].freeze

    # `ping_rates`: {"how" => PING round trips per second at one producer}.
    def initialize(cases, batch:, ping_rates:)
      @cases = cases
      @batch = batch
      @ping_rates = ping_rates
    end

    def table
      rows = keys.map do |mode, concurrency|
        sidekiq, solid = find(:sidekiq, mode, concurrency), find(:solid_jobs, mode, concurrency)
        [mode, batch_of(mode), concurrency, delimit((sidekiq || solid).jobs), rate(sidekiq), rate(solid),
         times(ratio(solid, sidekiq)), times(scaling(sidekiq)), times(scaling(solid)), per_job(sidekiq), per_job(solid)]
      end
      Markdown.table(["Mode", "Batch", "Producers", "Jobs/case", "Sidekiq jobs/s", "SolidJobs jobs/s", "SolidJobs/Sidekiq",
                      "Sidekiq vs 1 producer", "SolidJobs vs 1 producer", "Sidekiq cmds/job", "SolidJobs cmds/job"], rows)
    end

    # How close single enqueue at one producer comes to one round trip per
    # job. The redis-rb PING includes the Ruby client's own cost per call,
    # which the native SolidJobs client does not pay, so SolidJobs can pass
    # it; the raw-socket PING is the closer bound.
    def floor_lines
      lines = @ping_rates.map do |how, rate|
        "- PING round trips at 1 producer (#{how}, one connection): #{delimit(rate)}/s"
      end
      %i[sidekiq solid_jobs].each do |system|
        c = find(system, :single, 1)
        next unless c&.ok?

        shares = @ping_rates.map { |how, rate| format("%.0f%% of the %s PING rate", 100.0 * c.jobs_per_second / rate, how) }
        lines << "- #{label(system)} single enqueue at 1 producer: #{delimit(c.jobs_per_second)} jobs/s = #{shares.join(", ")}"
      end
      lines
    end

    # "PASS ..." / "MISS ..." per mode and producer count; "n/a" when a
    # case failed or was not run (not a miss).
    def target_lines
      keys.map do |mode, concurrency|
        value = ratio(find(:solid_jobs, mode, concurrency), find(:sidekiq, mode, concurrency))
        what = "#{mode} enqueue#{mode == :bulk ? " (batch #{@batch})" : ""} at #{concurrency} producer(s): " \
               "SolidJobs/Sidekiq #{SIDEKIQ_CALL.fetch(mode)}"
        next "n/a   #{what} (needs both cases measured)" unless value

        target = TARGETS.fetch(mode)
        format("%-5s %s = %.2fx (target >= %.1fx)", value >= target ? "PASS" : "MISS", what, value, target)
      end
    end

    # Where the time of each case's median run went: CPU of this process
    # (the producers and the client libraries) and of redis-server, each as
    # a share of one core. Either near 100% means that side is the limit;
    # together near the core count means the host is.
    def cpu_table
      rows = @cases.select(&:ok?).map do |c|
        run = c.median_run
        [c.mode, c.concurrency, label(c.system), delimit(run.jobs_per_second), format("%.0f", run.producer_cpu_percent),
         format("%.0f", run.redis_cpu_percent)]
      end
      Markdown.table(["Mode", "Producers", "System", "Jobs/s (median run)", "Producer process CPU %", "redis-server CPU %"], rows)
    end

    def error_lines
      @cases.reject(&:ok?).map { |c| "- #{label(c.system)} #{c.mode} at #{c.concurrency}: #{c.error}" }
    end

    def csv_header = CSV_HEADER

    def csv_rows
      rows = @cases.map do |c|
        rates = c.ok? ? c.rates : []
        other = c.system == :solid_jobs ? find(:sidekiq, c.mode, c.concurrency) : nil
        run = c.ok? ? c.median_run : nil
        [c.mode, batch_of(c.mode), c.concurrency, c.system, c.jobs, c.runs.size, run && c.jobs_per_second.round,
         rates.first&.round, rates.last&.round, run && c.commands_per_job.round(3), ratio(c, other)&.round(3),
         run&.producer_cpu_percent&.round(1), run&.redis_cpu_percent&.round(1), c.error]
      end
      rows + @ping_rates.map { |how, rate| ["ping", 1, 1, "PING via #{how}", nil, 1, rate.round, nil, nil, 1, nil, nil, nil, nil] }
    end

    private

    def keys = @cases.map { |c| [c.mode, c.concurrency] }.uniq
    def find(system, mode, concurrency) = @cases.find { |c| c.system == system && c.mode == mode && c.concurrency == concurrency }
    def batch_of(mode) = mode == :bulk ? @batch : 1
    def label(system) = system == :sidekiq ? "Sidekiq" : "SolidJobs"

    def ratio(numerator, denominator)
      return nil unless numerator&.ok? && denominator&.ok?

      numerator.jobs_per_second / denominator.jobs_per_second
    end

    # This case's rate over the same system and mode at one producer.
    def scaling(c) = c && ratio(c, find(c.system, c.mode, 1))

    def rate(c)
      return "n/a" unless c
      return "error" unless c.ok?

      delimit(c.jobs_per_second)
    end

    def per_job(c) = c&.ok? ? format("%.2f", c.commands_per_job) : "n/a"
    def times(value) = value ? format("%.2fx", value) : "n/a"

    # 123456.7 -> "123,457"
    def delimit(number)
      number.round.to_s.reverse.scan(/\d{1,3}/).join(",").reverse
    end
  end
end
