# frozen_string_literal: true

require "etc"
require_relative "common"

module Bench
  # CPU time and memory of processes, read from Linux /proc: the one reader
  # of /proc/<pid> for every harness.
  module ProcFacts
    TICKS_PER_SECOND = Etc.sysconf(Etc::SC_CLK_TCK)
    # The smallest difference #cpu_seconds can show.
    RESOLUTION = 1.0 / TICKS_PER_SECOND
    SUM_EXEC_RUNTIME = /^se\.sum_exec_runtime\s*:\s*([\d.]+)/

    module_function

    # --- CPU ------------------------------------------------------------------

    # utime + stime in seconds, all threads; 0.0 for a process that has
    # exited (or is not ours to read), so it can be summed over processes.
    # The difference over a wall-clock window, divided by the window, is the
    # CPU use in that window (1.0 = one core busy).
    def cpu_seconds(pid)
      stat_cpu_seconds(pid)
    rescue SystemCallError
      0.0
    end

    # As #cpu_seconds, but a process that is gone is a Failure: for a
    # measurement of one process that must still be running.
    def cpu_seconds!(pid)
      stat_cpu_seconds(pid)
    rescue Errno::ENOENT, Errno::ESRCH
      raise Failure, "process #{pid} is gone; cannot read its CPU time"
    end

    # utime + stime from /proc/<pid>/stat. Counted in clock ticks, and
    # charged to whichever thread is running when a tick fires, so an idle
    # process that wakes briefly between ticks may show no time at all.
    def stat_cpu_seconds(pid)
      stat = File.read("/proc/#{pid}/stat")
      # The command name (field 2) is in parentheses and may contain spaces
      # and parentheses itself; fields are counted after its last ")".
      # utime and stime are fields 14 and 15, i.e. 12th and 13th after it.
      fields = stat[(stat.rindex(")") + 2)..].split
      (Integer(fields[11]) + Integer(fields[12])).fdiv(TICKS_PER_SECOND)
    end

    # The scheduler's own runtime of every live thread of the process
    # (se.sum_exec_runtime in /proc/<pid>/task/*/sched, nanosecond
    # precision), or nil where the kernel does not provide it. A thread that
    # exits inside a window takes its time with it; idle workers keep
    # theirs.
    def scheduler_seconds(pid)
      runtimes = Dir["/proc/#{pid}/task/*/sched"].map do |path|
        File.read(path)[SUM_EXEC_RUNTIME, 1]
      rescue Errno::ENOENT, Errno::ESRCH
        "0" # the thread ended between listing and reading
      end
      return nil if runtimes.empty? || runtimes.any?(&:nil?)

      runtimes.sum { |ms| Float(ms) } / 1000.0
    end

    # --- memory ---------------------------------------------------------------
    #
    # RSS counts every resident page, shared library pages included; PSS
    # charges shared pages pro rata (libruby, the extension are split between
    # the processes that map them), so it is what the process really costs,
    # a sum over processes counts each page once, and it does not move when
    # an unrelated process maps the same library. A leak shows in both.

    # Kilobytes; 0 when the process is gone, so it can be summed.
    def pss_kb(pid) = kb_field("/proc/#{pid}/smaps_rollup", "Pss") || 0

    # MB; nil when the process is gone.
    def rss_mb(pid) = kb_field("/proc/#{pid}/status", "VmRSS")&./(1024.0)

    # MB; nil when the process is gone or the kernel has no smaps_rollup (< 4.14).
    def pss_mb(pid) = kb_field("/proc/#{pid}/smaps_rollup", "Pss")&./(1024.0)

    def kb_field(path, name)
      line = File.foreach(path).find { |l| l.start_with?("#{name}:") }
      line && Integer(line.split[1])
    rescue SystemCallError
      nil
    end
  end
end
