# frozen_string_literal: true

# The test app plus Active Job: a `solid-jobs` process started with it runs
# Active Job jobs on thread workers and SolidJobs tasks in Ractors.
require_relative "cli_app"
require_relative "active_jobs"
