# frozen_string_literal: true

module Bench
  # A benchmark case could not be measured (as opposed to a slow result).
  class Failure < StandardError; end

  # Monotonic, so wall-clock adjustments cannot distort a measurement.
  def self.now = Process.clock_gettime(Process::CLOCK_MONOTONIC)
end
