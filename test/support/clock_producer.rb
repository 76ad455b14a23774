# frozen_string_literal: true

# A producer process for the clock tests, run under libfaketime:
#   ruby clock_producer.rb REDIS_URL LEDGER LABEL DELAY_SECONDS
# with the settings `solid-jobs --require cli_app.rb` reads from the
# environment (SOLID_JOBS_TEST_NAMESPACE, SOLID_JOBS_TEST_ENGINE_URL...).
# Enqueues ClockTask(LEDGER, LABEL) with enqueue_after(DELAY_SECONDS) and
# prints, as JSON, the host's monotonic time just before the enqueue and
# the wall clock this process sees (to check the skew is in effect).
$LOAD_PATH.unshift(File.expand_path("../../lib", __dir__))
require "json"
require "solid_jobs"
require_relative "cli_app"

url, ledger, label, delay = ARGV
SolidJobs.configure { |c| c.redis_url = url }
enqueued_at = Process.clock_gettime(Process::CLOCK_MONOTONIC)
ClockTask.enqueue_after(Float(delay), ledger, label)
puts JSON.generate({"enqueued_at" => enqueued_at, "wall_ms" => SolidJobs::Clock.now_ms})
