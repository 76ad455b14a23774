# frozen_string_literal: true

module Bench
  # Percentiles of a set of latencies in milliseconds.
  #
  # Nearest rank (the smallest value with at least p% of the sample at or
  # below it): every reported figure is a latency that was actually measured,
  # and with a handful of samples p99 is simply the maximum, not an
  # interpolation between two observations.
  LatencyStats = Struct.new(:count, :p50, :p95, :p99, :max, :mean, keyword_init: true) do
    def self.of(values)
      return nil if values.empty?

      sorted = values.sort
      rank = ->(p) { sorted[[(p * sorted.size / 100.0).ceil - 1, 0].max] }
      new(count: sorted.size, p50: rank.(50), p95: rank.(95), p99: rank.(99), max: sorted.last,
          mean: sorted.sum / sorted.size)
    end

    # "0.412" etc., for tables and CSV.
    def self.ms(value) = value ? format("%.3f", value) : "n/a"
  end
end
