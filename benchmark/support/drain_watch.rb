# frozen_string_literal: true

require_relative "common"

module Bench
  # Watches a seeded queue from a separate Redis connection while a worker
  # process drains it, and times the drain.
  #
  # t0 is the first poll that sees fewer than `jobs` entries (the worker has
  # booted and started fetching), so process boot is not measured. t1 is the
  # first poll that sees the queue empty and, when `claims_pattern` is given
  # (SolidJobs), every claim hash empty too: SolidJobs moves jobs from the
  # list into per-node claim hashes, and a claim is removed only when its job
  # completed. Sidekiq has no such record: each of its threads fetches one
  # job at a time, so when its queue is empty at most `concurrency` jobs are
  # still running (its processed counter is written only periodically, so it
  # cannot mark the end).
  #
  # The watcher's own commands are counted, per command name, so they can be
  # taken out of the server's command statistics.
  class DrainWatch
    POLL_INTERVAL = 0.005

    Window = Struct.new(:started, :finished, :own_commands) do
      def seconds = finished - started
    end

    def initialize(redis, list_key:, jobs:, worker:, timeout:, claims_pattern: nil)
      @redis = redis
      @list_key = list_key
      @jobs = jobs
      @worker = worker
      @timeout = timeout
      @claims_pattern = claims_pattern
      @own_commands = Hash.new(0)
    end

    def wait
      deadline = Bench.now + @timeout
      started = previous_poll = nil
      loop do
        length = queue_length
        polled = Bench.now
        started ||= polled if length < @jobs
        if length.zero? && claims_empty?
          # The whole drain fitted between two polls: the previous poll is
          # the latest moment it can have started.
          started = previous_poll if started == polled && previous_poll
          return Window.new(started, polled, @own_commands)
        end

        check_worker_alive(length)
        raise Failure, "timed out after #{@timeout}s with #{length} of #{@jobs} jobs still queued" if polled > deadline

        previous_poll = polled
        sleep POLL_INTERVAL
      end
    end

    private

    def queue_length
      @own_commands["llen"] += 1
      @redis.llen(@list_key)
    end

    def claims_empty?
      return true unless @claims_pattern

      @own_commands["keys"] += 1
      @redis.keys(@claims_pattern).all? do |key|
        @own_commands["hlen"] += 1
        @redis.hlen(key).zero?
      end
    end

    def check_worker_alive(length)
      return unless @worker.exited?

      raise Failure, "worker exited (#{@worker.exit_status}) with #{length} of #{@jobs} jobs still queued"
    end
  end
end
