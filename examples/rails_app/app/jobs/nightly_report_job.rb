# frozen_string_literal: true

# Active Job's own retries: the first execution fails, retry_on enqueues the
# next attempt through the adapter, and the second succeeds.
class NightlyReportJob < ActiveJob::Base
  class NotReadyYet < StandardError; end
  retry_on NotReadyYet, wait: 1, attempts: 3

  def perform(day)
    raise NotReadyYet, "data for #{day} not ready yet" if executions == 1

    DemoLedger.record("NightlyReportJob: report for #{day} (execution #{executions})")
  end
end
