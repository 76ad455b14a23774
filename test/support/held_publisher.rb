# frozen_string_literal: true

# A publisher process that stops for good while its publication is behind
# the barrier: its instrumenter sleeps on job.journaled, and the test
# SIGKILLs it there. Arguments: redis_url namespace events_path ledger_path.
$LOAD_PATH.unshift(File.expand_path("../../lib", __dir__))
require "solid_jobs"
require_relative "tasks"
require_relative "recording_instrumenter"

url, namespace, events, ledger = ARGV
SolidJobs.configure do |c|
  c.redis_url = url
  c.namespace = namespace
  c.publication_barrier_ttl = 1
  c.instrumenter = RecordingInstrumenter.new(events, sleep_on: "job.journaled")
end
LedgerTask.enqueue(ledger, "held")
