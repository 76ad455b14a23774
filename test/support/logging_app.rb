# frozen_string_literal: true

# What test/logging_test.rb's workers load: the test app, Active Job and
# the logging tasks. With SOLID_JOBS_TEST_LOGGER set, the app routes its
# log lines to a Logger writing to that file.
require_relative "active_job_app"
require_relative "logging_tasks"

if (path = ENV["SOLID_JOBS_TEST_LOGGER"])
  SolidJobs.configure { |c| c.logger = Logger.new(path) }
end
