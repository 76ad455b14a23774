# frozen_string_literal: true

module SolidJobs
  # systemd `Type=notify` (sd_notify(3)): the node tells systemd when its
  # workers run (READY=1) and when it begins to stop (STOPPING=1), with a
  # STATUS= line `systemctl status` shows. The datagrams are sent by the
  # native extension (solid_core::notify), which also pings the watchdog
  # from the heartbeat thread when WATCHDOG_USEC is set. Outside systemd
  # (no NOTIFY_SOCKET) nothing is sent; a failed send never fails the node.
  module Systemd
    module_function

    # Says once on the log that systemd was told, and how often the
    # watchdog is pinged, so an operator can match it with WatchdogSec.
    def ready(status)
      sent = notify("READY=1\nSTATUS=#{line(status)}")
      if sent
        every = Native.watchdog_interval
        watchdog = every ? "; watchdog pinged every #{every.round(3)}s by the heartbeat" : ""
        Log.info("systemd notified: READY=1#{watchdog}")
      end
      sent
    end

    def stopping(status) = notify("STOPPING=1\nSTATUS=#{line(status)}")

    def notify(state)
      Native.sd_notify(state)
    rescue StandardError => e
      Log.warn("systemd notification failed: #{e.class}: #{e.message}")
      false
    end

    # One line: a newline would start another assignment.
    def line(text) = text.to_s.tr("\n", " ")
  end
end
