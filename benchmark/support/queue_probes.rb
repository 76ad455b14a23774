# frozen_string_literal: true

module Bench
  # A Redis list drained by Sidekiq or SolidJobs, read from a separate
  # connection.
  #
  # SolidJobs moves jobs from the list into per-node claim hashes, and a
  # claim is removed only when its job completed, so drained means the list
  # and every claim hash are empty. Sidekiq has no such record
  # (claims_pattern nil): each of its threads fetches one job at a time, so
  # when its queue is empty at most `concurrency` jobs are still running
  # (its processed counter is written only periodically, so it cannot mark
  # the end).
  #
  # The probe's own commands are counted, per command name, so they can be
  # taken out of the server's command statistics.
  class RedisQueueProbe
    attr_reader :own_commands

    def initialize(redis, list_key:, claims_pattern: nil)
      @redis = redis
      @list_key = list_key
      @claims_pattern = claims_pattern
      @own_commands = Hash.new(0)
    end

    def waiting
      @own_commands["llen"] += 1
      @redis.llen(@list_key)
    end

    # Asked right after `waiting` saw the list empty: only claims remain.
    def drained?
      return true unless @claims_pattern

      @own_commands["keys"] += 1
      @redis.keys(@claims_pattern).all? do |key|
        @own_commands["hlen"] += 1
        @redis.hlen(key).zero?
      end
    end
  end

  # A SolidEngine server, through its STATS command. Waiting jobs are ready
  # or scheduled; a job the worker holds (prefetched or running) is
  # reserved until its ack, so drained means all three are zero.
  class EngineQueueProbe
    def initialize(client)
      @client = client
    end

    def waiting
      stats = stats()
      stats.fetch("ready") + stats.fetch("scheduled")
    end

    # A fresh STATS, not the one behind `waiting`: both answers then come
    # from one consistent snapshot.
    def drained?
      stats = stats()
      (stats.fetch("ready") + stats.fetch("scheduled") + stats.fetch("reserved")).zero?
    end

    # STATS answers "key:value\r\n" lines; numeric values become Integers.
    def stats
      @client.call(["STATS"]).each_line(chomp: true).to_h do |line|
        key, value = line.split(":", 2)
        [key, Integer(value, exception: false) || value]
      end
    end
  end
end
