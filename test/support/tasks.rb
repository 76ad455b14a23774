# frozen_string_literal: true

# Tasks used by the suite, in-process and by spawned `solid-jobs` processes
# (via --require). They write to a ledger file named in their arguments,
# which works from any Ractor and any process.
module Ledger
  module_function

  def append(path, line)
    File.open(path, "a") { |f| f.write("#{line}\n") }
  end

  def worker_name
    Ractor.current == Ractor.main ? (Thread.current.name || "main") : Ractor.current.name
  end
end

class LedgerTask
  include SolidJobs::Task

  def execute_task(path, label)
    Ledger.append(path, "#{label} #{Ledger.worker_name} #{Process.pid}")
  end
end

class CpuTask
  include SolidJobs::Task

  # About a few milliseconds of pure Ruby work, then a ledger line.
  def execute_task(path, label, iterations = 300_000)
    x = 0
    iterations.times { |i| x += i }
    Ledger.append(path, "#{label} #{Ledger.worker_name} #{Process.pid}")
  end
end

class SlowTask
  include SolidJobs::Task

  def execute_task(path, label, seconds)
    Ledger.append(path, "start #{label}")
    sleep(seconds)
    Ledger.append(path, "#{label} #{Ledger.worker_name} #{Process.pid}")
  end
end

class FailingTask
  include SolidJobs::Task
  task_options max_failures: 2

  def execute_task(path, label)
    Ledger.append(path, "attempt #{label}")
    raise ArgumentError, "failing on purpose: #{label}"
  end
end

class GlobalTouchingTask
  include SolidJobs::Task

  # Reading a non-shareable constant from a non-main Ractor raises
  # Ractor::IsolationError.
  MUTABLE = +"not shareable"

  def execute_task = MUTABLE.length
end

class CriticalTask < LedgerTask
  task_options channel: "critical", max_failures: 10
end

class NotATask
  def execute_task(*) = nil
end

# An execution interceptor that records each job it wraps in a ledger.
class LedgerInterceptor
  def initialize(path)
    @path = path
  end

  def around(execution)
    Ledger.append(@path, "before #{execution.envelope["task"]} #{Ledger.worker_name}")
    yield
    Ledger.append(@path, "after #{execution.envelope["task"]}")
  end
end
