-- Enqueues the job of one schedule's tick, at most once per (schedule,
-- tick) whatever the number of nodes proposing it: every node runs the
-- scheduler, and this script alone decides (docs/recurring.md, decision 37).
-- KEYS[1] the schedule's state (HASH), KEYS[2] channel list, KEYS[3]
-- channels set, KEYS[4] doorbell, KEYS[5] job index
-- ARGV[1] tick (ms), ARGV[2] the tick after it (ms, 0: none), ARGV[3]
-- missed policy (latest | skip), ARGV[4] on-time window (ms), ARGV[5]
-- retention floor (ms), ARGV[6] channel, ARGV[7] envelope, ARGV[8] job id
-- Returns {outcome, redis now (ms), last tick decided after the call, last
-- tick decided before it} (ticks in ms, -1: none): 'early' (the tick is
-- later than Redis' clock: nothing written or read; the proposer retries
-- after the difference), 'seen' (this tick or a later one was already
-- decided), 'stale' (a missed tick while a later tick is already due by
-- Redis' clock: nothing written; the proposer proposes the latest instead),
-- 'enqueued', 'skipped' (a missed tick the policy does not run: recorded as
-- decided, no job). The tick decided before lets a node that
-- saw a later decision learn that Redis forgot it (lost writes: a crash
-- under appendfsync everysec, a failover to a lagging replica, a restore).
local now = redis_now_ms()
local tick = tonumber(ARGV[1])
-- Redis' clock, never the proposer's, says whether a tick is due: a node
-- whose clock runs fast cannot enqueue early.
if tick > now then return {'early', now, -1, -1} end

local last = tonumber(redis.call('HGET', KEYS[1], 'tick_ms') or '')
-- Ticks are decided in increasing order, so "decided" is one number per
-- schedule: a tick at or before it was enqueued or skipped already, by
-- this node before a restart or by another node.
if last and tick <= last then return {'seen', now, last, last} end

local late = now - tick > tonumber(ARGV[4])
local next_tick = tonumber(ARGV[2])
-- Of the missed ticks only the latest may be decided: Redis, not the
-- proposer, says which is latest. A node whose clock estimate lags (a slow
-- clock before its first reply, a Redis whose clock is ahead after a
-- failover) or a proposal Redis executes long after it was sent (buffered
-- while Redis was paused, its client gone) names an older missed tick;
-- deciding it would run a second missed tick, or a burst of them, after
-- the one downtime.
if late and next_tick > 0 and next_tick <= now then return {'stale', now, last or -1, last or -1} end
-- A late tick was missed (no node could enqueue it on time). Without any
-- record of the schedule (new, or unused longer than its retention), a late
-- tick is treated as missed and skipped too: the schedule starts at its
-- next tick rather than running a tick from before it existed.
local run = not late or (ARGV[3] == 'latest' and last ~= nil)
local fields = {'tick_ms', tick, 'decided_ms', now}
if run then
  -- An ordinary ready job from here on: indexed, pushed, announced as
  -- enqueue.lua does. Its id is new, so the HSETNX always writes.
  if redis.call('HSETNX', KEYS[5], ARGV[8], 'ready|' .. ARGV[6]) == 1 then
    if redis.call('LPUSH', KEYS[2], ARGV[7]) == 1 then ring(ARGV[6]) end
    ring_channels(KEYS[4])
    redis.call('SADD', KEYS[3], ARGV[6])
  end
  for _, v in ipairs({'job_id', ARGV[8], 'job_tick_ms', tick, 'enqueued_ms', now}) do fields[#fields + 1] = v end
  fields[#fields + 1] = 'outcome'
  fields[#fields + 1] = 'enqueued'
else
  fields[#fields + 1] = 'outcome'
  fields[#fields + 1] = 'skipped'
end
redis.call('HSET', KEYS[1], unpack(fields))
-- The state outlives the schedule's next tick by at least a day (or one
-- period, if longer), so a removed schedule's state disappears by itself,
-- yet never while any node still proposes its ticks: each decision extends
-- it. Once expired, every tick a node could propose is later than the last
-- decided (the next tick passed undecided), so expiry can never let a tick
-- be enqueued twice.
local period = (next_tick > tick) and (next_tick - tick) or 0
local keep = math.max(tonumber(ARGV[5]), period)
redis.call('PEXPIREAT', KEYS[1], math.max(next_tick, now) + keep)
local before = last or -1
if run then return {'enqueued', now, tick, before} end
return {'skipped', now, tick, before}
