# frozen_string_literal: true

module SolidJobs
  # The one clock of the Ruby side: wall-clock milliseconds since the epoch,
  # the unit of every `*_ms` field the scripts, the envelope and the journal
  # carry. Wall time, not monotonic: the values are compared with times
  # other processes wrote (solid_core's `now_ms` reads the same clock).
  module Clock
    module_function

    def now_ms
      Process.clock_gettime(Process::CLOCK_REALTIME, :millisecond)
    end
  end
end
