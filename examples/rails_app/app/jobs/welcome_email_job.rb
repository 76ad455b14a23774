# frozen_string_literal: true

# An ordinary Active Job job: runs on a SolidJobs thread worker, on the
# "mailers" channel (queue_as).
class WelcomeEmailJob < ActiveJob::Base
  queue_as :mailers

  def perform(user_name)
    DemoLedger.record("WelcomeEmailJob: welcome mail for #{user_name}")
  end
end
