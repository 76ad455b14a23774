-- Write publications behind the publication barrier: each envelope is
-- stored in `publishing`, invisible to claims and promotion, until its
-- publisher has emitted job.enqueued and job.journaled and releases it
-- (release.lua), or until the barrier expires and a node's heartbeat
-- releases it (heartbeat.lua), so a publisher that dies never strands work.
-- Used only when a custom instrumenter is configured. An id already live is
-- skipped, as in enqueue.lua.
-- KEYS[1] publishing zset, KEYS[2] channels set, KEYS[3] job index
-- ARGV[1] barrier ttl ms, ARGV[2] route (channel or `name:p`), ARGV[3] delay ms (0: ready once
-- released), ARGV[4..] envelopes; both durations count on Redis' clock.
-- Returns {number of envelopes held, due ms (0: ready once released)}: the
-- caller names its members `due|channel|envelope` with it.
local now = redis_now_ms()
local expires = now + tonumber(ARGV[1])
local due = tonumber(ARGV[3])
if due > 0 then due = now + due end
local state = (due > 0 and 'planned|' or 'ready|') .. ARGV[2]
local args = {}
for i = 4, #ARGV do
  local id = job_id(ARGV[i])
  if not id or redis.call('HSETNX', KEYS[3], id, state) == 1 then
    args[#args + 1] = expires
    args[#args + 1] = string.format('%d', due) .. '|' .. ARGV[2] .. '|' .. ARGV[i]
  end
end
if #args == 0 then return {0, due} end
redis.call('ZADD', KEYS[1], unpack(args))
redis.call('SADD', KEYS[2], route_channel(prefix_of(KEYS[3]), ARGV[2]))
return {#args / 2, due}
