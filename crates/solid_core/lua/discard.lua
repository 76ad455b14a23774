-- Give a job up: drop it, or keep it in the capped archive. Used for final
-- failures and for quarantined (undecodable or unknown) entries.
-- Returns 1, or 0 when the claim is stale (nothing is written). Idempotent
-- like retry.lua: a discard resent after a lost reply returns 1.
-- KEYS[1] node claims hash, KEYS[2] archive zset, KEYS[3] archive entries,
-- KEYS[4] attempts hash, KEYS[5] discarded metric, KEYS[6] stale metric, KEYS[7] job index,
-- KEYS[8] settled marker of this token
-- ARGV[1] token ('' when the job is not claimed), ARGV[2] job id,
-- ARGV[3] archive record JSON, ARGV[4] max entries, ARGV[5] max age ms,
-- ARGV[6] '1' to archive, '0' to drop, ARGV[7] the unique lock's hex name
-- ('' or absent: none), ARGV[8] its mode
-- The archive is ordered and trimmed by age on Redis' clock.
if ARGV[1] ~= '' then
  -- The record, read before it goes: its flow object (concurrency limits)
  -- comes from what Redis holds, not from the node, so a quarantined entry
  -- Rust could not decode still releases its slot.
  local rec = redis.call('HGET', KEYS[1], ARGV[1])
  local claim = take_claim(KEYS[1], ARGV[1], KEYS[8], 'discard', KEYS[6])
  if claim ~= 'taken' then return claim == 'done' and 1 or 0 end
  if rec then
    release_slot_of(prefix_of(KEYS[7]), KEYS[7], rec, ARGV[1])
    ring_channels(prefix_of(KEYS[7]) .. 'doorbell')
  end
end
redis.call('HDEL', KEYS[4], ARGV[2])
redis.call('HDEL', KEYS[7], ARGV[2])
redis.call('INCR', KEYS[5])
-- A given-up unique job releases its lock (compare and delete), except
-- `while: :until_done` kept in the archive: that job is not done, and an
-- operator may re-enqueue it; the lock goes when its archive entry does.
local prefix = prefix_of(KEYS[7])
if ARGV[7] and ARGV[7] ~= '' and not (ARGV[6] == '1' and ARGV[8] == 'until_done') then
  local lock = prefix .. 'unique:' .. ARGV[7]
  if redis.call('GET', lock) == ARGV[2] then redis.call('DEL', lock) end
end
if ARGV[6] ~= '1' then return 1 end
local now = redis_now_ms()
redis.call('ZADD', KEYS[2], now, ARGV[2])
redis.call('HSET', KEYS[3], ARGV[2], ARGV[3])
-- Trim by age, then by count, a bounded amount per call so one discard never
-- blocks Redis for long; later discards finish the trim.
local old = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now - tonumber(ARGV[5]), 'LIMIT', 0, 500)
local excess = redis.call('ZCARD', KEYS[2]) - #old - tonumber(ARGV[4])
if excess > 0 then
  local more = redis.call('ZRANGE', KEYS[2], #old, #old + math.min(excess, 500) - 1)
  for _, id in ipairs(more) do old[#old + 1] = id end
end
if #old > 0 then
  release_archived_locks(prefix, KEYS[3], old)
  redis.call('ZREM', KEYS[2], unpack(old))
  redis.call('HDEL', KEYS[3], unpack(old))
end
return 1
