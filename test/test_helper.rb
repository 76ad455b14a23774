# frozen_string_literal: true

$LOAD_PATH.unshift(File.expand_path("../lib", __dir__))
require "minitest/autorun"
require "redis"
require "json"
require "securerandom"
require "tmpdir"
require "solid_jobs"
require_relative "support/processes"
require_relative "support/tasks"

Warning[:experimental] = false
ENV["SOLID_JOBS_LOG_LEVEL"] ||= "none"
Redis.silence_deprecations = true

# One Redis for the whole suite; each test gets its own namespace.
REDIS = RedisServer.new.start
Minitest.after_run { REDIS.cleanup }

module SolidJobsTestHelpers
  ROOT = File.expand_path("..", __dir__)

  def setup
    super
    SolidJobs::Testing.disable!
    SolidJobs.reset!
    @namespace = "t#{SecureRandom.hex(4)}"
    @ledger_dir = Dir.mktmpdir("solid-jobs-ledger")
    configure_solid_jobs
  end

  def teardown
    @conductor&.stop(timeout: 5)
    FileUtils.rm_rf(@ledger_dir)
    super
  end

  def configure_solid_jobs(**overrides)
    SolidJobs.configure do |c|
      c.redis_url = REDIS.url
      c.namespace = @namespace
      c.concurrency = 2
      c.heartbeat_interval = 0.5
      c.recovery_delay = 2
      c.shutdown_timeout = 5
      # No thread lane unless a test asks: the suite loads Active Job and
      # thread tasks, which would otherwise add thread workers to every node.
      c.thread_concurrency = 0
      overrides.each { |k, v| c.public_send(:"#{k}=", v) }
    end
  end

  def redis = @redis ||= Redis.new(url: REDIS.url)
  def key(suffix) = "#{@namespace}:#{suffix}"
  def ledger_path(name = "ledger") = File.join(@ledger_dir, name)

  def ledger_lines(name = "ledger")
    path = ledger_path(name)
    File.exist?(path) ? File.readlines(path, chomp: true) : []
  end

  # Waits for a condition that the system under test must reach; fails with
  # the message when it does not within the bound. Not a timing assertion:
  # the bound only keeps a broken build from hanging.
  def eventually(message = "condition", timeout: 20)
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + timeout
    until (result = yield)
      flunk("timed out after #{timeout}s waiting for: #{message}") if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline
      sleep 0.02
    end
    result
  end

  def start_conductor
    @conductor = SolidJobs::Conductor.new.start
  end

  # The check stamp (the node's wall clock, ms) of node `id`'s last heartbeat: its holding
  # record is rewritten by each beat with a new stamp. nil before the first.
  def heartbeat_stamp(id) = redis.get(key("holding:#{id}"))&.split("|", 3)&.fetch(1)&.to_i

  def claims_count
    redis.keys(key("claims:*")).sum { |k| redis.hlen(k) }
  end
end

class SolidJobsTest < Minitest::Test
  include SolidJobsTestHelpers
end
