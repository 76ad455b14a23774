# frozen_string_literal: true

require_relative "proc_facts"

module Bench
  # Samples the summed PSS of `pids` every INTERVAL on a thread, from
  # #start to #stop, and keeps the peak. Reading smaps_rollup costs the
  # kernel a walk of the page tables, so the interval is long enough to
  # keep the sampler out of the way of the workers on a 2-core host.
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
end
