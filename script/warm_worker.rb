#!/usr/bin/env ruby
# frozen_string_literal: true

# A warm worker for SolidJobs' warm pool, from a checkout: the same as
# `solid-jobs warm ID`, which is how an installed gem runs it. From the
# app's root:
#
#   script/warm_worker.rb 0       # listens on /tmp/solid_jobs_rails_0.sock
#
# Loads config/environment.rb once and runs the tasks SolidJobs workers send
# it, one at a time. Start SOLID_JOBS_WARM_WORKERS of them (IDs 0...N).
# SOLID_JOBS_WARM_SOCKET_DIR changes /tmp; SOLID_JOBS_WARM_TIMEOUT bounds
# the wait for a request line. INT/TERM: the socket is removed, the request
# being served finishes, the process exits. See docs/rails.md.

$LOAD_PATH.unshift(File.expand_path("../lib", __dir__))
require "solid_jobs"
require "solid_jobs/cli"

exit SolidJobs::CLI.new(["warm", *ARGV]).run
