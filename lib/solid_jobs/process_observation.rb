# frozen_string_literal: true

require "etc"

module SolidJobs
  # The `process` part of a node's observations: CPU time, resident memory,
  # GC count and time, total allocations. Each value is read from what the
  # process itself reports (nothing is estimated, nothing per Ractor). A
  # value never read successfully is null and listed under "unavailable"; a
  # value whose read fails later keeps its last reading, marked stale with
  # its age.
  class ProcessObservation
    PAGE_SIZE = begin
      Etc.sysconf(Etc::SC_PAGESIZE)
    rescue StandardError
      4096
    end

    READERS = {
      "cpu_seconds" => -> { Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID).round(6) },
      # Resident pages (second field of statm), Linux only.
      "rss_bytes" => -> { Integer(File.read("/proc/self/statm").split.fetch(1)) * PAGE_SIZE },
      "gc_count" => -> { GC.count },
      # GC.stat(:time) exists from Ruby 3.1 (milliseconds); older rubies raise.
      "gc_time_ms" => -> { GC.stat(:time) },
      "total_allocated_objects" => -> { GC.stat(:total_allocated_objects) }
    }.freeze

    def initialize(readers = READERS)
      @readers = readers
      @last = {}
    end

    # {"state" => "ok" | "stale" | "unavailable", "at_ms", each value,
    #  "stale" => bool, "age_ms" (of the oldest stale value, else 0),
    #  "unavailable" => [names never read]}
    def read(now_ms = Clock.now_ms)
      out = {"at_ms" => now_ms}
      stale_ages = []
      unavailable = []
      @readers.each do |name, reader|
        value = begin
          reader.call
        rescue StandardError
          nil
        end
        if value
          @last[name] = [value, now_ms]
          out[name] = value
        elsif (kept = @last[name])
          out[name] = kept[0]
          stale_ages << now_ms - kept[1]
        else
          out[name] = nil
          unavailable << name
        end
      end
      state = if unavailable.size == @readers.size then "unavailable"
              elsif stale_ages.any? then "stale"
              else "ok"
              end
      out.merge("state" => state, "stale" => stale_ages.any?, "age_ms" => stale_ages.max || 0, "unavailable" => unavailable)
    end
  end
end
