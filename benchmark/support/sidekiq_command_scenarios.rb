# frozen_string_literal: true

require "logger"
require "sidekiq"
require "sidekiq/fetch"
require "sidekiq/launcher"
require "sidekiq/processor"
require "sidekiq/scheduled"
require_relative "command_count_sidekiq_workers"
require_relative "metered_redis"

module Bench
  # Sidekiq's counterparts of the SolidJobs operations, for reference,
  # measured the same way (proxy and MONITOR) by running Sidekiq's own
  # classes in this process, one unit of work at a time: the client's push,
  # a Processor's `process_one` (what each of its threads loops on), the
  # scheduled-set poller's `enqueue_jobs`, and the Launcher's heartbeat.
  #
  # Sidekiq's periodic work is measured as one unit each, not by waiting
  # for it: its heartbeat (every 5 s) and one poll of the scheduled sets
  # (every 2.5-7.5 s for a small cluster, plus an SCARD of `processes` to
  # scale that interval). A processor thread that finds nothing also sends a
  # BRPOP every 2 s (its timeout).
  class SidekiqCommandScenarios
    OPERATIONS = %i[push push_bulk fetch_and_process retry scheduled_push scheduled_promotion heartbeat].freeze
    TITLES = {
      push: "Client.push (one job)",
      push_bulk: "Client.push_bulk (100 jobs)",
      fetch_and_process: "Processor#process_one: one job fetched and run",
      retry: "Processor#process_one: the job raises and is scheduled for retry",
      scheduled_push: "perform_in (one job)",
      scheduled_promotion: "Scheduled::Enq#enqueue_jobs with one job due",
      heartbeat: "Launcher heartbeat (every 5 s; flushes processed/failed counts)"
    }.freeze
    ROLES = Hash.new("sidekiq connection").freeze
    # The poller's Lua script, named in the breakdown like solid_core's.
    SCRIPTS = ScriptNames.by_sha.merge(Digest::SHA1.hexdigest(Sidekiq::Scheduled::Enq::LUA_ZPOPBYSCORE) => "zpopbyscore").freeze

    def initialize(redis_port, quiet: 0.5)
      @redis_port = redis_port
      @quiet = quiet
    end

    def run(operations = OPERATIONS)
      MeteredRedis.open(@redis_port, roles: ROLES, scripts: SCRIPTS, quiet: @quiet) do |metered|
        @control = metered.control
        @meter = metered.meter
        configure(metered.proxy.url)
        operations.map { |operation| send(operation) }
      end
    end

    private

    # One pooled connection: Sidekiq checks a connection out per call, and
    # with one there is no doubt which one has already connected.
    def configure(url)
      Sidekiq.logger = Logger.new(File::NULL)
      Sidekiq.redis = {url: url, size: 1}
      # Opens the connection, and leaves a job in a queue nobody measures.
      Sidekiq::Client.push("class" => CommandCountSidekiq::Noop, "args" => [0], "queue" => "warmup")
    end

    def measure(key, &block) = @meter.measure(key, TITLES.fetch(key), &block)

    # pipelined: SADD queues, LPUSH queue:bench.
    def push
      measure(:push) { CommandCountSidekiq::Noop.perform_async(1) && nil }
    end

    def push_bulk
      measure(:push_bulk) do
        Sidekiq::Client.push_bulk("class" => CommandCountSidekiq::Noop, "args" => Array.new(100) { |i| [i] }) && nil
      end
    end

    # BRPOP; processed/failed counts are kept in memory until the heartbeat.
    def fetch_and_process
      drain_queue
      push_directly(CommandCountSidekiq::Noop)
      measure(:fetch_and_process) { processor.send(:process_one) && nil }
    end

    # BRPOP, then ZADD retry.
    def retry
      drain_queue
      push_directly(CommandCountSidekiq::Failing)
      measure(:retry) do
        processor.send(:process_one)
      rescue ArgumentError
        nil
      end
    end

    # ZADD schedule.
    def scheduled_push
      @control.del("schedule")
      measure(:scheduled_push) { CommandCountSidekiq::Noop.perform_in(3600, 1) && nil }
    end

    # For each of `retry` and `schedule`: its Lua ZPOPBYSCORE until it finds
    # nothing, and a pipelined push per job found.
    def scheduled_promotion
      enq = Sidekiq::Scheduled::Enq.new
      enq.enqueue_jobs # loads its script while nothing is measured
      @control.del("retry")
      @control.zrange("schedule", 0, -1).each { |job| @control.zadd("schedule", Time.now.to_f - 1, job, xx: true) }
      measure(:scheduled_promotion) { enq.enqueue_jobs && nil }
    end

    def heartbeat
      launcher = Sidekiq::Launcher.new(Sidekiq.options.merge(queues: [CommandCountSidekiq::QUEUE], concurrency: 1))
      launcher.send(:❤) # the first heartbeat registers the process
      Sidekiq::Processor::PROCESSED.incr
      measure(:heartbeat) { launcher.send(:❤) && nil }
    end

    def processor
      @processor ||= Sidekiq::Processor.new(nil, Sidekiq.options.merge(fetch: Sidekiq::BasicFetch.new(queues: [CommandCountSidekiq::QUEUE])))
    end

    def drain_queue = @control.del("queue:#{CommandCountSidekiq::QUEUE}")

    def push_directly(worker)
      @control.lpush("queue:#{CommandCountSidekiq::QUEUE}", Sidekiq.dump_json(
        "class" => worker.name, "args" => [], "queue" => CommandCountSidekiq::QUEUE, "retry" => true,
        "jid" => SecureRandom.hex(12), "created_at" => Time.now.to_f, "enqueued_at" => Time.now.to_f
      ))
    end
  end
end
