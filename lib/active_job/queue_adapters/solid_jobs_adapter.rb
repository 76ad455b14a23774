# frozen_string_literal: true

# The conventional path of an Active Job adapter.
require "solid_jobs/active_job"
