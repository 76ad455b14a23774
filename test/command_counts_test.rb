# frozen_string_literal: true

require_relative "test_helper"
require_relative "support/command_scenarios"

# The Redis commands and round trips of each SolidJobs operation, exactly:
# a change that adds a round trip (or a command) to the hot path fails here
# with the new breakdown. Measured as `rake benchmark:commands` measures
# (test/support/command_meter.rb): counts, never times, so they do not
# depend on the host or on how busy it is.
class CommandCountsTest < SolidJobsTest
  # commands: sent by clients (EVALSHA is one); lua: run inside the
  # scripts; round_trips: request bursts (a pipeline is one).
  EXPECTED = {
    # enqueue.lua: HSETNX LPUSH SADD PUBLISH
    enqueue: {commands: 1, lua: 4, round_trips: 1},
    # enqueue.lua: HMGET HSET (the whole batch in the job index), LPUSH SADD PUBLISH
    enqueue_many: {commands: 1, lua: 5, round_trips: 1},
    # claim (the job; fewer than asked for, so the fetcher waits for the doorbell), ack.
    # Inside the scripts, not more round trips: a claim that claims reads Redis's
    # TIME and raises the fence counter to its clock floor (SET ... GET instead
    # of INCRBY), so tokens survive a Redis rollback; an ack writes the node's
    # last-batch marker (SET), so a batch resent after a lost reply is
    # recognised as applied, not stale (docs/reliability.md); and records the
    # batch's ids as one element of the bounded `completed` list (LPUSH, and
    # LINDEX of the oldest element: RPOP only once it is out of bounds), so a
    # lookup tells "completed" from "unknown" (Console#find). Trimmed for
    # issue 19 (15 in Lua before): the claim reads the node's heartbeat key
    # with its MGET (no EXISTS) and pops no second time once a pop returned
    # fewer than asked for (the list is empty); the ack looks at the
    # list's oldest element (LINDEX) only once per 1/16 of its bound.
    worker_turn: {commands: 2, lua: 12, round_trips: 2},
    # Scripts that compare or store due times read Redis' clock with TIME
    # (docs/reliability.md, "Clocks"): one command inside the script each,
    # no command sent and no round trip added.
    # claim (+TIME, the fence floor), record_failure (+TIME), retry (+TIME),
    # promote (+TIME; woken by `planned`, nothing due). retry.lua also
    # counts the retry (INCR metric:retried, for /metrics) in the same call.
    retry: {commands: 4, lua: 23, round_trips: 4},
    # schedule (+TIME), promote (+TIME; nothing due), promote (+TIME; moves
    # it and rings `ready` on doorbell:later). The node serves another
    # channel, so it no longer hears that ring (decision 50): the claim
    # that found its own channel empty (EXISTS MGET RPOP, one round trip)
    # is gone, 4/24/4 before.
    scheduled_promotion: {commands: 3, lua: 21, round_trips: 3},
    # heartbeat (+TIME; finds the dead node; also ZRANGEBYSCORE for expired
    # publication barriers and LPOP of the control mailbox), requeue, claim, ack.
    # The heartbeat also reconciles the node's claims with what it holds
    # (HKEYS, and SET of its holding record) and reads the namespace's
    # incarnation and the fence counter (GET twice), to hand back claims it
    # does not hold and to notice a lost or rolled-back Redis; the claim's TIME
    # and the ack's marker and completed list as in worker_turn. The dead are
    # found by deadline, whatever the number of nodes: ZADD (its own),
    # ZCOUNT of the overdue, and with one overdue ZRANGEBYSCORE and EXISTS
    # of each; SRANDMEMBER and a ZSCORE for each sampled node not already
    # found (a node without a deadline); requeue.lua ZREMs the dead node's
    # deadline.
    recovery: {commands: 4, lua: 36, round_trips: 4},
    # enqueue_unique.lua (docs/unique.md): MGET (the lock is free), HSETNX,
    # SET (the lock), LPUSH SADD PUBLISH
    unique_enqueue: {commands: 1, lua: 6, round_trips: 1},
    # enqueue_unique.lua: MGET (the lock), HMGET (its job is live): nothing written
    unique_duplicate: {commands: 1, lua: 2, round_trips: 1},
    # pause.lua: GET (not paused yet), TIME, SETRANGE, HSET (paused), SADD;
    # the claim the pushed job's doorbell triggers: MGET (the node key; the flow
    # string says paused: no RPOP); resume.lua: GET HDEL, DEL (nothing else
    # in the flow string), LLEN, PUBLISH (the channel holds a job); then the
    # worker turn (claim and ack, as above).
    pause_resume: {commands: 5, lua: 23, round_trips: 5},
    # Concurrency limits (docs/flow-control.md). The enqueue is a plain
    # enqueue.lua call: the limit rides in the envelope's meta.
    limited_enqueue: {commands: 1, lua: 4, round_trips: 1},
    # worker_turn plus, in the claim, SCARD (the key's slots held, once per
    # key per call) and SADD (the slot, with the claim record); in the ack,
    # SREM (the slot, with the claim record) and RPOP (no blocked job to
    # move back).
    limited_turn: {commands: 2, lua: 16, round_trips: 2},
    # Two jobs of one key, limit 1, in one push. claim: SCARD, the first is
    # claimed (TIME SET HSET SADD), the second blocked (LPUSH blocked:<hex>,
    # HSET its index state) and counted (INCRBY metric:blocked). ack: SREM,
    # then the move back (RPOP, HGET its state, HSET ready, GET its
    # channel's flow string: is it paused?, RPUSH to the list's head) and
    # PUBLISH ready (the list was empty). The ring wakes the
    # fetcher: a claim as in limited_turn, and its ack (SREM, RPOP nil).
    # No round trip beyond two worker turns.
    limited_blocked_turn: {commands: 4, lua: 41, round_trips: 4},
    # Priorities (docs/flow-control.md). enqueue.lua for the route `name:2`:
    # HSETNX LPUSH SADD, SETRANGE (level 2 in use in flow:<name>), PUBLISH.
    priority_enqueue: {commands: 1, lua: 5, round_trips: 1},
    # worker_turn plus one RPOP in the claim: the level list is popped
    # (the job: fewer than asked for, so not again), then the base list
    # (empty); the MGET
    # that reads the flow string (pause, levels in use) is the one every
    # claim makes. One RPOP per level in use per claim call, not per job.
    priority_turn: {commands: 2, lua: 13, round_trips: 2},
    # Rate limits (decision 42). worker_turn plus, in the claim, LLEN (the
    # key's log, once per key per call: under the limit, no LINDEX), and
    # RPUSH PEXPIRE (the admission logged, once per key per call). The ack
    # is a plain ack: an admission is not given back.
    rate_turn: {commands: 2, lua: 15, round_trips: 2},
    # Two jobs of one key at 1 per second in one push. claim: LLEN, the
    # first admitted (TIME SET HSET, RPUSH PEXPIRE), the second throttled
    # (LPUSH throttled:<hex>, HSET its index state, ZADD LT CH flow:wake,
    # ZRANGE: the earliest wake, PUBLISH throttled, INCRBY metric:throttled).
    # The ring wakes the heartbeat thread: promote (not due yet; +ZRANGE
    # flow:wake for its next due time), then at the wake promote moves it
    # back (LINDEX the oldest throttled job, LLEN and LINDEX the log, RPOP,
    # HGET its state, HSET ready, GET its channel's flow string: is it
    # paused?, RPUSH to the list's head, EXISTS: none
    # left, PUBLISH ready). The fetcher claims it (LLEN: the log expired
    # with its window, RPUSH PEXPIRE). Two worker turns and two promotions;
    # nothing polls.
    rate_throttled_turn: {commands: 6, lua: 62, round_trips: 6},
    # Ack-and-claim (decision 51): claim (the first job), claim (the
    # second, as the first starts), then ack_claim.lua twice: the first
    # job's completion and the third job in one call, the second's
    # completion and a claim that finds the channel empty (MGET RPOP) in
    # another; the acker writes the third's (no claim follows). 7 calls
    # before: a claim and an ack per job, and the empty claim.
    back_to_back: {commands: 5, lua: 38, round_trips: 5}
  }.freeze
  # Seconds without traffic that end an operation: far above any scheduling
  # delay of a runnable thread on a loaded host, so nothing late is missed.
  QUIET = 1.0

  # The job path only: telemetry (the journal and observations, written off
  # the job path in batches, once a second at most) is measured on its own
  # (docs/observability.md, "Cost"). Set before the configurations of the
  # test, its nodes and producers are created.
  def setup
    @telemetry_env = ENV["SOLID_JOBS_TELEMETRY"]
    ENV["SOLID_JOBS_TELEMETRY"] = "off"
    super
  end

  def teardown
    super
  ensure
    @telemetry_env ? ENV["SOLID_JOBS_TELEMETRY"] = @telemetry_env : ENV.delete("SOLID_JOBS_TELEMETRY")
  end

  CommandCounts::SolidJobsScenarios::OPERATIONS.each do |operation|
    define_method(:"test_#{operation}_commands_and_round_trips") do
      count = CommandCounts::SolidJobsScenarios.new(REDIS.port, quiet: QUIET).run([operation]).first
      assert_equal EXPECTED.fetch(operation), count.figures,
                   "#{count.title} now costs #{count.summary}. If the change is intended, update EXPECTED here " \
                   "and regenerate benchmark/results/commands.md with `bundle exec rake benchmark:commands`"
    end
  end
end
