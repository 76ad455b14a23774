# frozen_string_literal: true

require_relative "proc_facts"

module Bench
  # What benchmark/soak.rb samples from the backend at one moment:
  #   memory_mb  the backend's memory (what it is, is the gauge's memory_label)
  #   backlog    jobs enqueued but not yet taken by the worker
  #   done       jobs completed so far
  #   failed     jobs that raised so far
  GaugeReading = Struct.new(:memory_mb, :backlog, :done, :failed, keyword_init: true)

  # Redis: used_memory (what Redis allocated for data, not its RSS, so the
  # allocator keeping freed pages neither hides nor fakes a trend) and the
  # SolidJobs counters, which the worker's acker writes with each batch of
  # completions.
  class RedisGauge
    def initialize(redis, list_key:)
      @redis = redis
      @list_key = list_key
    end

    def memory_label = "Redis used MB"

    def read
      GaugeReading.new(memory_mb: Integer(@redis.info("memory").fetch("used_memory")) / (1024.0 * 1024),
                       backlog: @redis.llen(@list_key),
                       done: @redis.get("solid_jobs:metric:processed").to_i,
                       failed: @redis.get("solid_jobs:metric:failed").to_i)
    end
  end

  # SolidEngine: the server's RSS (it reports no memory figure of its own)
  # and one STATS for the rest.
  class EngineGauge
    def initialize(probe, server_pid)
      @probe = probe
      @pid = server_pid
    end

    def memory_label = "engine RSS MB"

    def read
      stats = @probe.stats
      GaugeReading.new(memory_mb: ProcFacts.rss_mb(@pid), backlog: stats.fetch("ready") + stats.fetch("scheduled"),
                       done: stats.fetch("acked_total"), failed: stats.fetch("failed_total"))
    end
  end
end
