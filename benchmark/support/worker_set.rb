# frozen_string_literal: true

require_relative "worker_process"

module Bench
  # Started worker processes (one, or N single-threaded Sidekiqs) behind
  # the one worker interface DrainWatch and the case runner use.
  class WorkerSet
    def initialize(workers)
      @workers = workers
    end

    def size = @workers.size
    def exited? = @workers.any?(&:exited?)
    def exit_status = @workers.map(&:exit_status).compact.first

    # TERM to all at once: Sidekiq takes up to its 2 s fetch timeout to
    # stop, which one after another would cost seconds per process.
    # Returns how many did not stop cleanly: needed KILL, or exited with a
    # failure status. Safe to call again (then it counts nothing new).
    def stop
      @workers.map { |w| Thread.new { w.stop && (w.exit_status.nil? || w.exit_status.success?) } }.count { |t| !t.value }
    end

    def description = @workers.map(&:description).uniq.join("; ") + (size > 1 ? " (x#{size})" : "")

    def log_tail(lines = 30)
      @workers.map(&:log_tail).reject { |t| t == "(no output)" }.uniq.join("\n---\n").lines.last(lines).join
    end
  end
end
