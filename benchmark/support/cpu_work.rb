# frozen_string_literal: true

# The CPU-bound workload shared by the Sidekiq and SolidJobs jobs and by the
# calibration in throughput.rb, so all three run exactly the same code.
#
# It touches no constants, globals or shared objects, so it runs unchanged
# inside a SolidJobs worker Ractor.
module BenchCpu
  module_function

  # Integer arithmetic only: no allocation, so GC does not blur the timing.
  # Returns the result so the loop cannot be optimised away.
  def spin(iterations)
    acc = 0
    i = 0
    while i < iterations
      acc = (acc * 31 + i) & 0xFFFFF
      i += 1
    end
    acc
  end
end
