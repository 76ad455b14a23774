# frozen_string_literal: true

require_relative "common"

module Bench
  # Watches a seeded queue while a worker process drains it, and times the
  # drain. What "queued" and "drained" mean comes from a probe (see
  # queue_probes.rb), so the same timing serves Redis and SolidEngine:
  #
  #   probe.waiting  -> jobs not yet taken by the worker
  #   probe.drained? -> true once no job is waiting or held (in flight);
  #                     asked only after `waiting` returned zero
  #
  # t0 is the first poll that sees fewer than `jobs` waiting (the worker has
  # booted and started fetching), so process boot is not measured. t1 is the
  # first poll that sees the queue drained.
  class DrainWatch
    POLL_INTERVAL = 0.005

    Window = Struct.new(:started, :finished) do
      def seconds = finished - started
    end

    def initialize(probe, jobs:, worker:, timeout:)
      @probe = probe
      @jobs = jobs
      @worker = worker
      @timeout = timeout
    end

    def wait
      deadline = Bench.now + @timeout
      started = previous_poll = nil
      loop do
        waiting = @probe.waiting
        polled = Bench.now
        started ||= polled if waiting < @jobs
        if waiting.zero? && @probe.drained?
          # The whole drain fitted between two polls: the previous poll is
          # the latest moment it can have started.
          started = previous_poll if started == polled && previous_poll
          return Window.new(started, polled)
        end

        check_worker_alive(waiting)
        raise Failure, "timed out after #{@timeout}s with #{waiting} of #{@jobs} jobs still waiting" if polled > deadline

        previous_poll = polled
        sleep POLL_INTERVAL
      end
    end

    private

    def check_worker_alive(waiting)
      return unless @worker.exited?

      raise Failure, "worker exited (#{@worker.exit_status}) with #{waiting} of #{@jobs} jobs still waiting"
    end
  end
end
