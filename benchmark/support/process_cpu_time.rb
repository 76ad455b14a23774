# frozen_string_literal: true

require "etc"
require_relative "common"

module Bench
  # CPU time a process (all of its threads) has used, in seconds. The
  # difference over a wall-clock window, divided by the window, is its CPU
  # use in that window (1.0 = one core busy).
  module ProcessCpuTime
    TICKS_PER_SECOND = Etc.sysconf(Etc::SC_CLK_TCK)
    # The smallest difference #seconds can show.
    RESOLUTION = 1.0 / TICKS_PER_SECOND
    SUM_EXEC_RUNTIME = /^se\.sum_exec_runtime\s*:\s*([\d.]+)/

    module_function

    # utime + stime from /proc/<pid>/stat. Counted in clock ticks, and
    # charged to whichever thread is running when a tick fires, so an idle
    # process that wakes briefly between ticks may show no time at all.
    def seconds(pid)
      stat = File.read("/proc/#{pid}/stat")
      # The command name (field 2) is in parentheses and may contain spaces
      # and parentheses itself; fields are counted after its last ")".
      # utime and stime are fields 14 and 15, i.e. 12th and 13th after it.
      fields = stat[(stat.rindex(")") + 2)..].split
      (Integer(fields[11]) + Integer(fields[12])).fdiv(TICKS_PER_SECOND)
    rescue Errno::ENOENT, Errno::ESRCH
      raise Failure, "process #{pid} is gone; cannot read its CPU time"
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
  end
end
