# frozen_string_literal: true

module Bench
  # Per-run job parameters, calibrated once in the benchmark process so
  # every client's jobs do identical work.
  Work = Struct.new(:cpu_iterations, :cpu_ms, :io_seconds, keyword_init: true)

  # A workload of benchmark/comparison.rb and stress.rb: the twin job
  # classes of benchmark/jobs.rb and the argument list of job number n.
  # Every list ends with n, which only the stress ledger reads.
  Scenario = Struct.new(:name, :sidekiq_class, :solid_class, :arguments, :description, keyword_init: true) do
    def job_class(family) = Object.const_get(family == :sidekiq ? sidekiq_class : solid_class)
    def argument_lists(jobs, work) = Array.new(jobs) { |n| arguments.call(n, work) }
  end

  module Scenarios
    CPU_JOB_SECONDS = 0.003
    IO_JOB_SECONDS = 0.005

    ALL = {
      "noop" => Scenario.new(name: "noop", sidekiq_class: "SidekiqNoop", solid_class: "SolidNoop",
                             arguments: ->(n, _work) { [n] }, description: "Each job does nothing"),
      "process-cpu" => Scenario.new(name: "process-cpu", sidekiq_class: "SidekiqCpu", solid_class: "SolidCpu",
                                    arguments: ->(n, work) { [work.cpu_iterations, n] },
                                    description: "Each job runs pure Ruby integer arithmetic (BenchCpu.spin) for about 3 ms"),
      "process-io" => Scenario.new(name: "process-io", sidekiq_class: "SidekiqIo", solid_class: "SolidIo",
                                   arguments: ->(n, work) { [work.io_seconds, n] },
                                   description: "Each job sleeps 5 ms (a blocking call that uses no CPU)"),
      "process-mixed" => Scenario.new(name: "process-mixed", sidekiq_class: "SidekiqMixed", solid_class: "SolidMixed",
                                      arguments: ->(n, work) { [work.cpu_iterations, work.io_seconds, n] },
                                      description: "Jobs alternate: even-numbered ones are process-cpu jobs, odd ones process-io jobs")
    }.freeze

    def self.names = ALL.keys
    def self.fetch(name) = ALL.fetch(name)
  end
end
