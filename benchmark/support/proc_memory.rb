# frozen_string_literal: true

module Bench
  # Memory of a running process from /proc (Linux), in MB.
  #
  # RSS counts every resident page, shared library pages included; PSS
  # charges shared pages pro rata, so it is what the process really costs
  # and does not move when an unrelated process maps the same library. A
  # leak shows in both.
  module ProcMemory
    module_function

    # nil when the process is gone.
    def rss_mb(pid) = kb_field("/proc/#{pid}/status", "VmRSS")&./(1024.0)

    # nil when the process is gone or the kernel has no smaps_rollup (< 4.14).
    def pss_mb(pid) = kb_field("/proc/#{pid}/smaps_rollup", "Pss")&./(1024.0)

    def kb_field(path, name)
      line = File.foreach(path).find { |l| l.start_with?("#{name}:") }
      line && Integer(line.split[1])
    rescue SystemCallError
      nil
    end
  end
end
