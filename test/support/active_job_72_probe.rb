# frozen_string_literal: true

# Run by test/active_job_72_test.rb in a process of its own, outside any
# bundle, with Active Job and Active Record 7.2 on RUBYLIB
# (script/rails-7.2) and Debian's sqlite3 and redis gems: what a Rails 7.2
# app with Active Record does through the adapter, printed as JSON (one
# line). ARGV: the sqlite database path. SOLID_JOBS_REDIS_URL and
# SOLID_JOBS_NAMESPACE name the test's Redis.
require "json"
require "logger"
require "active_record"
require "active_job"
require "solid_jobs"
require "redis"

ActiveRecord::Base.establish_connection(adapter: "sqlite3", database: ARGV.fetch(0))
ActiveRecord::Base.logger = nil
ActiveRecord::Schema.verbose = false
ActiveRecord::Schema.define { create_table(:accounts) { |t| t.string :name } }
class Account < ActiveRecord::Base; end

# What the Active Job railtie does once Active Record loads, and what
# `config.load_defaults 7.2` sets: the adapter decides (:default).
ActiveJob::Base.include ActiveJob::EnqueueAfterTransactionCommit
ActiveJob::Base.enqueue_after_transaction_commit = :default
ActiveJob::Base.queue_adapter = :solid_jobs
ActiveJob::Base.logger = Logger.new(nil)

class WelcomeJob < ActiveJob::Base
  def perform(*) = nil
end

# Counts the adapter's calls, to show perform_all_later makes one.
module CountCalls
  def self.calls = @calls ||= Hash.new(0)
  %i[enqueue enqueue_at enqueue_all].each do |name|
    define_method(name) do |*args|
      CountCalls.calls[name] += 1
      super(*args)
    end
  end
end
ActiveJob::QueueAdapters::SolidJobsAdapter.prepend(CountCalls)

namespace = ENV.fetch("SOLID_JOBS_NAMESPACE")
SolidJobs.configure do |c|
  c.redis_url = ENV.fetch("SOLID_JOBS_REDIS_URL")
  c.namespace = namespace
end
redis = Redis.new(url: ENV.fetch("SOLID_JOBS_REDIS_URL"))
ready = -> { redis.llen("#{namespace}:channel:default") }
out = {"active_job" => ActiveJob.version.to_s, "active_record" => ActiveRecord.version.to_s}

job = nil
Account.transaction do
  Account.create!(name: "committed")
  job = WelcomeJob.perform_later("committed")
  out["inside_transaction"] = ready.call
end
out["after_commit"] = ready.call
out["committed_id"] = job.provider_job_id

Account.transaction do
  Account.create!(name: "rolled back")
  WelcomeJob.perform_later("rolled back")
  raise ActiveRecord::Rollback
end
out["after_rollback"] = ready.call
out["accounts"] = Account.pluck(:name)

jobs = Array.new(3) { |i| WelcomeJob.new("bulk-#{i}") }
ActiveJob.perform_all_later(jobs) # returns nil
out["after_bulk"] = ready.call
out["bulk_ids"] = jobs.map(&:provider_job_id)
out["bulk_enqueued"] = jobs.map(&:successfully_enqueued?)
out["calls"] = CountCalls.calls.transform_keys(&:to_s)

prioritized = WelcomeJob.set(priority: 10).perform_later("prioritized")
# A priority other than the default is its own list, "<channel>:<level>".
out["priority_10"] = redis.keys("#{namespace}:channel:default:*").to_h do |k|
  [k.delete_prefix("#{namespace}:channel:"), redis.lrange(k, 0, -1).map { |raw| JSON.parse(raw).values_at("id", "meta") }]
end
out["prioritized_id"] = prioritized.provider_job_id

begin
  WelcomeJob.perform_later(2**70)
  out["big_integer"] = "enqueued"
rescue StandardError => e
  out["big_integer"] = "#{e.class}: #{e.message}"
end
out["stopping"] = ActiveJob::Base.queue_adapter.stopping?
puts JSON.generate(out)
