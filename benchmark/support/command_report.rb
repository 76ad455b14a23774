# frozen_string_literal: true

require_relative "markdown"

module Bench
  # The table and explanations of benchmark/commands.rb: SolidJobs' counts
  # per operation next to Sidekiq's counterparts.
  class CommandReport
    # The Sidekiq operations that correspond to each SolidJobs one (summed
    # when there are several), or why there is none.
    SIDEKIQ = {
      enqueue: [:push],
      enqueue_many: [:push_bulk],
      worker_turn: [:fetch_and_process],
      retry: [:retry],
      scheduled_promotion: %i[scheduled_push scheduled_promotion],
      recovery: "none: BasicFetch keeps no record of a fetched job, so a crashed process loses it"
    }.freeze

    # What each command is, per operation (the measured breakdown follows).
    WHY = {
      enqueue: "`enqueue.lua`: HSETNX marks the id live in the job index (deduplication, get, cancel) unless it is " \
               "already, LPUSH adds the envelope, SADD records the channel name, PUBLISH rings the `ready` doorbell " \
               "because the list went from empty to non-empty (an enqueue into a non-empty channel skips it: 3 in Lua).",
      enqueue_many: "the same script once for all 100 envelopes (up to 1,000 per call): HMGET finds which ids are " \
                    "already live, one HSET registers the others in the job index, then one LPUSH, SADD and PUBLISH.",
      worker_turn: "the doorbell message wakes the idle fetcher. `claim.lua`: EXISTS checks the node's heartbeat key, GET " \
                   "whether any cancelled job is waiting, RPOP takes up to the free window (a second RPOP finds the list " \
                   "empty), TIME and SET ... GET take a fence token above both the counter and a floor from Redis's " \
                   "clock (so tokens never repeat after a Redis rollback), HSET records the claim. It got fewer jobs than " \
                   "it asked for, so every channel was empty: the fetcher waits for the doorbell instead of claiming " \
                   "again. After the task returns, the acker's `ack.lua`: SET its node's last-batch marker (a batch " \
                   "resent after a lost reply is recognised as applied), HMGET checks the token is still held, HDEL ×3 " \
                   "removes the claim, the failure record and the job-index entry, INCRBY counts it processed.",
      retry: "the same claim; then, on the node's pooled connection, `record_failure.lua` (HEXISTS fence check, HGET " \
             "and HSET the failure record, INCR failed) and, once FailurePolicy chose the delay, `retry.lua` (HDEL the " \
             "claim, SET the settle marker that makes a resent retry idempotent, ZADD `retrying`, HSET the job-index " \
             "state, ZRANGE the earliest retry, PUBLISH `planned` since it is the new earliest). The `planned` message " \
             "wakes the heartbeat thread: `promote.lua` finds nothing due (ZRANGEBYSCORE on `planned` and `retrying`) " \
             "and reads the next due time (ZRANGE ×2).",
      scheduled_promotion: "`schedule.lua` (HSETNX job index, as for one enqueue; ZADD `planned`, SADD channel, ZRANGE earliest, PUBLISH " \
                           "`planned`); the heartbeat thread's immediate `promote.lua` finds nothing due; at the due time " \
                           "`promote.lua` moves the job (ZRANGEBYSCORE, ZREM, HGET the cancelled check, HSET job index " \
                           "ready, LPUSH, ZRANGEBYSCORE `retrying`, PUBLISH `ready`, ZRANGE ×2 for the next due time); " \
                           "`ready` wakes the fetcher of every idle node in the namespace, which claims once and here " \
                           "finds its own channel empty (the job's channel is served by no node). The subscriber's three " \
                           "messages are `planned` from schedule.lua, the `planned` this benchmark sends in place of " \
                           "the timer, and `ready`.",
      recovery: "the live node's heartbeat tick: `heartbeat.lua` (SET its node key with a TTL, SADD nodes, LLEN its " \
                "channel, SMEMBERS nodes, EXISTS per registered node: the dead one's key is gone, ZRANGEBYSCORE for expired " \
                "publication holds, LPOP of the node's control mailbox, HKEYS of its own claims to hand back any it " \
                "does not hold and SET of its holding record, GET ×2 of the namespace's incarnation and the fence " \
                "counter to notice a lost or rolled-back Redis); then `requeue.lua` " \
                "for the dead node (EXISTS its key again, atomically; HGETALL its claims, HSET job index ready, RPUSH " \
                "back at the head of the channel, DEL claims and node key, SREM nodes, PUBLISH `ready`); then a worker " \
                "turn as above: claim, ack."
    }.freeze

    SIDEKIQ_WHY = {
      push: "pipelined SADD `queues` + LPUSH `queue:bench`.",
      push_bulk: "the same two commands for all 100 jobs.",
      fetch_and_process: "BRPOP (blocking, 2 s timeout); processed/failed counts stay in memory until the heartbeat; " \
                         "no acknowledgement.",
      retry: "BRPOP, then ZADD `retry`.",
      scheduled_push: "ZADD `schedule`.",
      scheduled_promotion: "per poll: `zpopbyscore` (EVALSHA: ZRANGEBYSCORE, ZREM when found) on `retry` and on " \
                           "`schedule` until one finds nothing, and a pipelined SADD + LPUSH per job found.",
      heartbeat: "MULTI (INCRBY ×4 and EXPIRE ×2 for the processed/failed stats, UNLINK + EXPIRE the workers hash, " \
                 "HSET per busy thread) EXEC; PING (RTT sample); MULTI (SADD processes, EXISTS, HMSET, EXPIRE, RPOP " \
                 "signals) EXEC."
    }.freeze

    def initialize(solid_jobs, sidekiq, timer_runs = [])
      @solid_jobs = solid_jobs
      @sidekiq = sidekiq.to_h { |count| [count.key, count] }
      @timer_runs = timer_runs
    end

    def table
      rows = @solid_jobs.map do |count|
        [count.title, count.commands, count.lua, count.round_trips, sidekiq_figures(count.key)]
      end
      Markdown.table(["Operation", "SolidJobs sent", "SolidJobs in Lua", "SolidJobs round trips",
                      "Sidekiq 6.4.1 sent / in Lua / round trips"], rows)
    end

    # One line per operation: what each command is, then what ran.
    def explanations
      @solid_jobs.map do |count|
        "- **#{count.title}** (#{count.commands}/#{count.lua}/#{count.round_trips}): #{WHY.fetch(count.key)} " \
          "Measured: #{count.breakdown}."
      end
    end

    def sidekiq_lines
      @sidekiq.values.map do |count|
        "- #{count.title} (#{count.commands}/#{count.lua}/#{count.round_trips}): #{SIDEKIQ_WHY.fetch(count.key)} " \
          "Measured: #{count.breakdown}."
      end
    end

    # How many promote calls the due time cost when the heartbeat thread's
    # own timer was left to fire.
    def timer_line
      return nil if @timer_runs.empty?

      at_due = @timer_runs.map { |count| SolidJobsCommandScenarios.promotes(count) - 1 }.tally.sort
      "Timer path: #{@timer_runs.size} run(s) of `enqueue_after(#{SolidJobsCommandScenarios::TIMER_DELAY})` left to the " \
        "heartbeat thread's own timer cost " +
        at_due.map { |promotes, runs| "#{promotes} promote call(s) at the due time in #{runs} run(s)" }.join(", ") +
        ". One is needed; a second finds nothing due yet: due times are kept to the millisecond, so a wake-up " \
        "can come within the due millisecond, just before the job is due."
    end

    private

    def sidekiq_figures(key)
      keys = SIDEKIQ.fetch(key)
      return keys if keys.is_a?(String)

      counts = keys.map { |k| @sidekiq[k] }
      return "not measured" if counts.any?(&:nil?)

      %i[commands lua round_trips].map { |figure| counts.map(&figure).join(" + ") }.join(" / ")
    end
  end
end
