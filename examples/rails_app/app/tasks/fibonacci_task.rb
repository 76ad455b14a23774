# frozen_string_literal: true

# A plain SolidJobs task: pure Ruby, Ractor-safe, runs in a worker Ractor.
class FibonacciTask
  include SolidJobs::Task

  def execute_task(n)
    a, b = 0, 1
    n.times { a, b = b, a + b }
    DemoLedger.record("FibonacciTask: fib(#{n}) = #{a}")
  end
end
