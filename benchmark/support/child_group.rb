# frozen_string_literal: true

module Bench
  # Puts every process the benchmark starts (redis-server, engine servers,
  # workers, load generators) into one process group, led by a tiny shell
  # loop that kills the group if the benchmark dies without cleaning up: a
  # crash inside a native extension (or kill -9) skips every `ensure`, and
  # would otherwise leave servers and a busy worker running forever.
  #
  # The watchdog leads the group, not the first child: setpgid into a group
  # whose leader has exited and been reaped fails with EPERM, and children
  # such as an engine server per durability mode come and go during a run.
  class ChildGroup
    WATCH_INTERVAL = 1

    def spawn(*command, **options)
      start_watchdog unless @watchdog
      Process.spawn(*command, **options, pgroup: @watchdog)
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

    # `kill -KILL 0` signals the watchdog's own group: every child, and the
    # watchdog last of all.
    def start_watchdog
      script = "while kill -0 #{Process.pid} 2>/dev/null; do sleep #{WATCH_INTERVAL}; done; kill -KILL 0"
      @watchdog = Process.spawn("sh", "-c", script, pgroup: true, in: File::NULL, out: File::NULL, err: File::NULL)
    end
  end
end
