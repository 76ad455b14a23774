# frozen_string_literal: true

require "etc"

module Bench
  # CPU time and memory of a set of processes, read from Linux /proc.
  # A process that has exited (or is not ours to read) counts as zero.
  module ProcFacts
    TICKS_PER_SECOND = Etc.sysconf(Etc::SC_CLK_TCK)

    module_function

    # utime + stime in seconds. The command name (field 2) may contain
    # spaces, so fields are counted after its closing parenthesis.
    def cpu_seconds(pid)
      fields = File.read("/proc/#{pid}/stat").rpartition(")").last.split
      (Integer(fields[11]) + Integer(fields[12])).fdiv(TICKS_PER_SECOND)
    rescue SystemCallError
      0.0
    end

    # Proportional set size: shared pages (libruby, the extension) are
    # split between the processes that map them, so a sum over processes
    # counts each page once. Kilobytes.
    def pss_kb(pid)
      line = File.foreach("/proc/#{pid}/smaps_rollup").find { |l| l.start_with?("Pss:") }
      line ? Integer(line.split[1]) : 0
    rescue SystemCallError
      0
    end
  end
end
