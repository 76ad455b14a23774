# frozen_string_literal: true

# Tasks that cannot run inside a Ractor (they read a Mutex held in a class
# instance variable) and say so with `execution: :thread`. Loaded only by the
# tests of mixed nodes and by test/support/lanes_app.rb, because their mere
# presence gives a :ractor node thread workers.
class ThreadOnlyTask
  include SolidJobs::Task
  task_options execution: :thread

  @lock = Mutex.new
  class << self
    attr_reader :lock
  end

  def execute_task(path, label, seconds = 0)
    self.class.lock.synchronize do
      Ledger.append(path, "start #{label}") if seconds.positive?
      sleep(seconds)
      Ledger.append(path, "#{label} #{Ledger.worker_name} #{Process.pid}")
    end
  end
end

# Inherits `execution: :thread` and the need for the main Ractor.
class ThreadOnlySubTask < ThreadOnlyTask
  @lock = Mutex.new
end
