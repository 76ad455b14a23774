# frozen_string_literal: true

# Tasks that are given up at their first failure (max_failures 1), so a
# worker fills the archive: two tasks, two error classes, two channels.
# Their arguments and messages carry a sentinel the dashboard must never
# show.
class DoomedTask
  include SolidJobs::Task
  task_options max_failures: 1

  def execute_task(label) = raise(ArgumentError, "doomed #{label}")
end

class DoomedOtherTask
  include SolidJobs::Task
  task_options max_failures: 1, channel: "doomed"

  def execute_task(label) = raise(KeyError, "other #{label}")
end

# Retried an hour after each failure: stays `retrying` while a test looks.
class PatientTask
  include SolidJobs::Task
  task_options max_failures: 5

  retry_delay { |_count, _error, _envelope| 3600 }

  def execute_task(label) = raise(ArgumentError, "patient #{label}")
end
