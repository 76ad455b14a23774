-- Pause a channel (docs/flow-control.md, "Pausing channels"): every claim
-- reads `flow:<name>` in the MGET it already makes and skips the channel
-- while its byte 0 is `P`, so the pause holds from each node's next claim,
-- with no heartbeat wait. Jobs keep arriving (enqueue, promotion, recovery
-- write the list as before) and stay ready.
-- KEYS[1] flow:<name>, KEYS[2] paused hash, KEYS[3] channels set
-- ARGV[1] channel name, ARGV[2] who paused it ('' for nobody named)
-- Returns 1 when the channel was not paused before, 0 when it already was
-- (the first pause's time and author are kept).
if string.sub(redis.call('GET', KEYS[1]) or '', 1, 1) == 'P' and redis.call('HEXISTS', KEYS[2], ARGV[1]) == 1 then
  return 0
end
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
-- Byte 0 only: the rest of the string (priority levels in use) is kept.
redis.call('SETRANGE', KEYS[1], 0, 'P')
local by = cjson.null
if ARGV[2] ~= '' then by = ARGV[2] end
redis.call('HSET', KEYS[2], ARGV[1], cjson.encode({ paused_ms = now, by = by }))
-- A channel paused before its first job is listed like one written to.
redis.call('SADD', KEYS[3], ARGV[1])
return 1
