# frozen_string_literal: true

module Bench
  # Least-squares line through (seconds, value) points: how fast a gauge
  # moves, robust to the noise of any single sample.
  module Trend
    module_function

    # Units of value per hour; nil with fewer than two distinct times.
    def slope_per_hour(times, values)
      n = times.size
      return nil if n < 2

      mean_t = times.sum / n.to_f
      mean_v = values.sum / n.to_f
      spread = times.sum { |t| (t - mean_t)**2 }
      return nil if spread.zero?

      times.zip(values).sum { |t, v| (t - mean_t) * (v - mean_v) } / spread * 3600
    end
  end
end
