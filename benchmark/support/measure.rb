# frozen_string_literal: true

require "etc"

module Bench
  # CPU time and memory of processes, read from Linux /proc: the one reader
  # of /proc/<pid> for every harness.
  module ProcFacts
    TICKS_PER_SECOND = Etc.sysconf(Etc::SC_CLK_TCK)
    # The smallest difference #cpu_seconds can show.
    RESOLUTION = 1.0 / TICKS_PER_SECOND
    SUM_EXEC_RUNTIME = /^se\.sum_exec_runtime\s*:\s*([\d.]+)/

    module_function

    # utime + stime in seconds, all threads, from /proc/<pid>/stat; 0.0 for
    # a process that has exited, so it can be summed over processes. Counted
    # in clock ticks, charged to whichever thread runs when a tick fires, so
    # an idle process that wakes briefly between ticks may show no time.
    def cpu_seconds(pid)
      stat = File.read("/proc/#{pid}/stat")
      # The command name (field 2) is in parentheses and may contain spaces
      # and parentheses itself; utime and stime are fields 14 and 15, the
      # 12th and 13th after its last ")".
      fields = stat[(stat.rindex(")") + 2)..].split
      (Integer(fields[11]) + Integer(fields[12])).fdiv(TICKS_PER_SECOND)
    rescue SystemCallError
      0.0
    end

    # The scheduler's own runtime of every live thread of the process
    # (se.sum_exec_runtime in /proc/<pid>/task/*/sched, nanosecond
    # precision), or nil where the kernel does not provide it. A thread that
    # exits inside a window takes its time with it; idle workers keep theirs.
    def scheduler_seconds(pid)
      runtimes = Dir["/proc/#{pid}/task/*/sched"].map do |path|
        File.read(path)[SUM_EXEC_RUNTIME, 1]
      rescue Errno::ENOENT, Errno::ESRCH
        "0" # the thread ended between listing and reading
      end
      return nil if runtimes.empty? || runtimes.any?(&:nil?)

      runtimes.sum { |ms| Float(ms) } / 1000.0
    end

    # RSS counts every resident page, shared library pages included; PSS
    # charges shared pages pro rata (libruby, the extension are split between
    # the processes that map them), so it is what the process really costs,
    # a sum over processes counts each page once, and it does not move when
    # an unrelated process maps the same library. A leak shows in both.

    # Kilobytes; 0 when the process is gone, so it can be summed.
    def pss_kb(pid) = kb_field("/proc/#{pid}/smaps_rollup", "Pss") || 0

    # MB; nil when the process is gone (or, for PSS, the kernel has no smaps_rollup, < 4.14).
    def rss_mb(pid) = kb_field("/proc/#{pid}/status", "VmRSS")&./(1024.0)
    def pss_mb(pid) = kb_field("/proc/#{pid}/smaps_rollup", "Pss")&./(1024.0)

    def kb_field(path, name)
      line = File.foreach(path).find { |l| l.start_with?("#{name}:") }
      line && Integer(line.split[1])
    rescue SystemCallError
      nil
    end
  end

  # Samples the summed PSS of `pids` every INTERVAL on a thread, from #start
  # to #stop, and keeps the peak. Reading smaps_rollup costs the kernel a
  # walk of the page tables, so the interval is long enough to keep the
  # sampler out of the way of the workers on a 2-core host.
  class PeakMemory
    INTERVAL = 0.05

    def initialize(pids)
      @pids = pids
      @peak_kb = 0
    end

    def start
      sample
      @thread = Thread.new do
        until @stopping
          sleep INTERVAL
          sample
        end
      end
      self
    end

    # Peak summed PSS in kilobytes, including a last sample taken now.
    def stop
      @stopping = true
      @thread&.join
      sample
      @peak_kb
    end

    private

    def sample
      total = @pids.sum { |pid| ProcFacts.pss_kb(pid) }
      @peak_kb = total if total > @peak_kb
    end
  end

  # Per-command call counts from INFO commandstats. Redis counts commands
  # run inside Lua scripts (redis.call) as well as the EVALSHA that ran
  # them, so a script-heavy client shows more commands than round trips.
  module CommandStats
    module_function

    def snapshot(redis) = calls(redis.info("commandstats"))

    # {command => calls} of one INFO commandstats reply.
    def calls(info) = info.transform_values { |stats| Integer(stats.fetch("calls")) }

    # Microseconds Redis spent in `command`, by the same reply: for EVALSHA
    # the whole script's run, the commands it called included.
    def usec(info, command) = Integer(info.dig(command, "usec") || 0)

    # Microseconds Redis spent in every command between two INFO
    # commandstats replies, less the share of the calls the benchmark made
    # itself (`own`, by name: a command's usec pro rata to its calls). A
    # command run inside a script counts in its own usec and in the
    # EVALSHA's, so for a client that uses scripts this counts that part
    # twice: an upper bound of Redis' time on its behalf.
    def usec_delta(before, after, own)
      after.keys.sum do |name|
        calls = Integer(after[name].fetch("calls")) - Integer(before.dig(name, "calls") || 0)
        next 0 unless calls.positive?

        theirs = [calls - own.fetch(name, 0), 0].max
        (usec(after, name) - usec(before, name)) * theirs.fdiv(calls)
      end
    end

    # Calls between two snapshots, less those the benchmark made itself.
    def delta(before, after, own)
      after.to_h { |name, calls| [name, calls - before.fetch(name, 0) - own.fetch(name, 0)] }
           .select { |_, calls| calls.positive? }
    end
  end

  # Percentiles of latencies in milliseconds, nearest rank (the smallest
  # value with at least p% of the sample at or below it): every figure is a
  # latency actually measured, and with few samples p99 is the maximum, not
  # an interpolation.
  LatencyStats = Struct.new(:count, :p50, :p95, :p99, :max, :mean, keyword_init: true) do # rubocop:disable Lint/StructNewOverride -- the tables' column names; nothing enumerates a LatencyStats
    def self.of(values)
      return nil if values.empty?

      sorted = values.sort
      rank = ->(p) { sorted[[(p * sorted.size / 100.0).ceil - 1, 0].max] }
      new(count: sorted.size, p50: rank.(50), p95: rank.(95), p99: rank.(99), max: sorted.last, mean: sorted.sum / sorted.size)
    end
  end
end
