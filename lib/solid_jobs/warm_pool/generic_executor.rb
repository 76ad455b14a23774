# frozen_string_literal: true

# Runs a task in the warm pool (SolidJobs::WarmPool): its arguments are the
# task's class name and its arguments as plain JSON. A thread task: it waits
# on a socket, keeps per-process counters, and must not take a Ractor.
class SolidJobsGenericExecutor
  include SolidJobs::Task
  task_options execution: :thread

  RemoteError = SolidJobs::WarmPool::RemoteError
  Timeout = SolidJobs::WarmPool::Timeout
  Refused = SolidJobs::WarmPool::Refused

  # Returns the task's result as the warm worker sent it.
  def execute_task(target_class, arguments)
    SolidJobs::WarmPool.call(target_class, arguments)
  end
end
