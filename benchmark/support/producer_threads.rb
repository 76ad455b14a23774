# frozen_string_literal: true

require_relative "common"

module Bench
  # Runs producer threads in this process, each pushing its own share of
  # batches, and times them together: from the moment all threads are
  # started and waiting at a gate to the moment the last one has finished.
  # Thread creation is outside the window, so a case at concurrency 8 is not
  # charged for starting 8 threads.
  #
  # A push that raises is counted (its jobs as failed) and the thread goes
  # on: an error rate is a result, and the caller checks the queue length
  # against what was reported pushed.
  class ProducerThreads
    Outcome = Struct.new(:seconds, :pushed, :failed, :first_error, keyword_init: true)

    # `shares`: one Array of batches per thread; a batch is an Array of
    # argument lists, pushed by the block given to #run.
    def initialize(shares)
      @shares = shares
    end

    def run(&push)
      ready = Queue.new
      gate = Queue.new
      threads = @shares.map { |share| Thread.new { ready << true; gate.pop; push_all(share, push) } }
      @shares.size.times { ready.pop }
      started = Bench.now
      @shares.size.times { gate << true }
      tallies = threads.map(&:value)
      seconds = Bench.now - started
      Outcome.new(seconds: seconds, pushed: tallies.sum { |t| t[0] }, failed: tallies.sum { |t| t[1] },
                  first_error: tallies.map { |t| t[2] }.compact.first)
    end

    private

    def push_all(share, push)
      pushed = failed = 0
      first_error = nil
      share.each do |batch|
        push.call(batch)
        pushed += batch.size
      rescue StandardError => e
        failed += batch.size
        first_error ||= e
      end
      [pushed, failed, first_error]
    end
  end
end
