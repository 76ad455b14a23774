# frozen_string_literal: true

require_relative "peak_memory"

module Bench
  # A DrainWatch probe (queue_probes.rb) that also meters the processes
  # over exactly the window DrainWatch times: CPU time is read at the first
  # poll that sees a job taken and at the poll that sees the queue drained,
  # and peak memory is sampled in between. Wrapping the probe keeps
  # DrainWatch itself unchanged.
  class MeteredProbe
    Readings = Struct.new(:worker_cpu_seconds, :server_cpu_seconds, :peak_pss_kb, keyword_init: true)

    # worker_pids: the worker processes; server_pids: the servers the
    # client needs (redis-server or solid-engine-server). Memory covers
    # both.
    def initialize(probe, jobs:, worker_pids:, server_pids:)
      @probe = probe
      @jobs = jobs
      @worker_pids = worker_pids
      @server_pids = server_pids
    end

    def waiting
      @probe.waiting.tap { |waiting| start_metering if waiting < @jobs && !@started }
    end

    def drained?
      @probe.drained?.tap { |drained| finish_metering if drained }
    end

    def own_commands = @probe.respond_to?(:own_commands) ? @probe.own_commands : {}

    def readings
      @readings or raise Failure, "the drain was not metered (it never started or never finished)"
    end

    # Stops the memory sampler of a drain that failed; idempotent.
    def close
      @memory&.stop
    end

    private

    def start_metering
      @started = [cpu(@worker_pids), cpu(@server_pids)]
      @memory = PeakMemory.new(@worker_pids + @server_pids).start
    end

    def finish_metering
      return unless @started

      worker_cpu, server_cpu = @started
      @readings = Readings.new(worker_cpu_seconds: cpu(@worker_pids) - worker_cpu, server_cpu_seconds: cpu(@server_pids) - server_cpu,
                               peak_pss_kb: @memory.stop)
    end

    def cpu(pids) = pids.sum { |pid| ProcFacts.cpu_seconds(pid) }
  end
end
