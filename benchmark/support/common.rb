# frozen_string_literal: true

module Bench
  # A benchmark case could not be measured (as opposed to a slow result).
  class Failure < StandardError; end

  # Monotonic, so wall-clock adjustments cannot distort a measurement.
  def self.now = Process.clock_gettime(Process::CLOCK_MONOTONIC)

  # A size or count from the environment; a bad value fails the run before
  # anything starts, instead of being silently replaced by the default.
  def self.positive_integer(env, name, default)
    return default unless env[name]

    value = Integer(env[name], exception: false)
    raise Failure, "#{name} must be a positive integer (got #{env[name].inspect})" unless value&.positive?

    value
  end

  # Reaps `pid` if it exits within `timeout` seconds: its Process::Status,
  # or nil while it is still running (the caller decides whether to kill).
  def self.wait_for_exit(pid, timeout)
    deadline = now + timeout
    loop do
      _, status = Process.wait2(pid, Process::WNOHANG)
      return status if status
      return nil if now > deadline

      sleep 0.02
    end
  end

  # Kills and reaps a child that must not outlive its step.
  def self.kill_child(pid)
    Process.kill("KILL", pid)
    Process.wait(pid)
  rescue Errno::ESRCH, Errno::ECHILD
    nil
  end

  def self.tail(path, lines = 30)
    File.exist?(path) ? File.readlines(path).last(lines).join : "(no output)"
  end
end
