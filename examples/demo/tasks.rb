# frozen_string_literal: true

# Demo tasks. Both are Ractor-safe: no mutable constants, no globals.
class NoopTask
  include SolidJobs::Task

  def execute_task(_n) = nil
end

# About 3 ms of pure Ruby CPU work; appends the worker Ractor's name to a
# ledger so the demo can show that both cores were used.
class FibonacciTask
  include SolidJobs::Task

  def execute_task(n, ledger)
    fib(n)
    File.open(ledger, "a") { |f| f.write("#{Ractor.current.name}\n") }
  end

  private

  def fib(n) = n < 2 ? n : fib(n - 1) + fib(n - 2)
end
