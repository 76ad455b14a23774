# frozen_string_literal: true

module Bench
  # Puts every process the benchmark starts (redis-server, workers) into one
  # process group, watched by a tiny shell loop that kills the group if the
  # benchmark dies without cleaning up: a crash inside a native extension
  # (or kill -9) skips every `ensure`, and would otherwise leave redis-server
  # and a busy worker running forever.
  class ChildGroup
    WATCH_INTERVAL = 1

    def spawn(*command, **options)
      pid = Process.spawn(*command, **options, pgroup: @pgid || true)
      unless @pgid
        @pgid = pid # the first child leads the group
        start_watchdog
      end
      pid
    end

    # Normal cleanup has stopped the children; the watchdog is not needed.
    def close
      return unless @watchdog

      Process.kill("KILL", @watchdog)
      Process.wait(@watchdog)
    rescue Errno::ESRCH, Errno::ECHILD
      nil
    ensure
      @watchdog = nil
    end

    private

    def start_watchdog
      script = "while kill -0 #{Process.pid} 2>/dev/null; do sleep #{WATCH_INTERVAL}; done; kill -KILL -#{@pgid} 2>/dev/null"
      @watchdog = Process.spawn("sh", "-c", script, pgroup: true, in: File::NULL, out: File::NULL, err: File::NULL)
    end
  end
end
