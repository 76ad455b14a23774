# frozen_string_literal: true

require_relative "case_result"
require_relative "comparison_clients"

module Bench
  # Runs every client x scenario x concurrency case `repetitions` times and
  # prints a line per run. Repetitions are whole passes, and the clients
  # alternate within each (scenario, concurrency), so drift on a shared host
  # (another tenant, thermal) hits every client of a comparison alike.
  class CaseMatrix
    def initialize(runner, clients:, scenarios:, concurrencies:, repetitions:, jobs:)
      @runner = runner
      @clients = clients
      @scenarios = scenarios
      @concurrencies = concurrencies
      @repetitions = repetitions
      @jobs = jobs # scenario name -> jobs per case
    end

    def run
      cases = {}
      @repetitions.times do |repetition|
        each_case do |client, scenario, concurrency|
          label = "#{"[#{repetition + 1}/#{@repetitions}] " if @repetitions > 1}#{scenario.name} c=#{concurrency} #{client}: "
          print label
          jobs = @jobs.fetch(scenario.name)
          run = @runner.run(Clients.build(client), scenario, concurrency, jobs)
          puts summary(run)
          warn "  #{run.failure.gsub("\n", "\n  ")}" unless run.measured?
          (cases[[scenario.name, concurrency, client]] ||= CaseResult.new(client: client, scenario: scenario.name, concurrency: concurrency,
                                                                          jobs: jobs)) << run
        end
      end
      cases.values
    end

    def case_count = @clients.size * @scenarios.size * @concurrencies.size * @repetitions

    private

    def each_case
      @scenarios.each do |scenario|
        @concurrencies.each do |concurrency|
          @clients.each { |client| yield client, scenario, concurrency }
        end
      end
    end

    def summary(run)
      return "NOT MEASURED" unless run.measured?

      line = format("%.0f jobs/s (%.3f s), worker CPU %.0f%% (%.2f CPU-s/1k jobs), peak PSS %.1f MB, %s allocs/job, %.2f Redis cmds/job",
                    run.jobs_per_second, run.seconds, run.worker_cpu_percent, run.worker_cpu_per_thousand, run.peak_pss_mb,
                    run.allocations_per_job ? format("%.1f", run.allocations_per_job) : "n/a", run.commands_per_job)
      run.errors.empty? ? line : "#{line} -- ERRORS: #{run.errors.map { |kind, n| "#{n} #{kind}" }.join(", ")}"
    end
  end
end
