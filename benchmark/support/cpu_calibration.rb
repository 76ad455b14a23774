# frozen_string_literal: true

require_relative "common"
require_relative "cpu_work"

module Bench
  # Iterations of BenchCpu.spin that take `seconds` on this host, measured
  # once in the benchmark process so every system gets the same count and
  # does identical work per job. The median of a few timed runs (the first,
  # untimed run warms up the method cache). Same method as throughput.rb.
  module CpuCalibration
    PROBE_ITERATIONS = 300_000
    RUNS = 7

    Calibrated = Struct.new(:iterations, :milliseconds)

    module_function

    def for_seconds(seconds)
      BenchCpu.spin(PROBE_ITERATIONS)
      timings = Array.new(RUNS) do
        started = Bench.now
        BenchCpu.spin(PROBE_ITERATIONS)
        Bench.now - started
      end
      per_iteration = timings.sort[RUNS / 2] / PROBE_ITERATIONS
      iterations = (seconds / per_iteration).round
      Calibrated.new(iterations, iterations * per_iteration * 1000)
    end
  end
end
