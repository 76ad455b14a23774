# frozen_string_literal: true

# `Bundler.require` (Rails apps) requires a gem by its name, "solid-jobs".
require "solid_jobs"
SolidJobs.integrate_frameworks
