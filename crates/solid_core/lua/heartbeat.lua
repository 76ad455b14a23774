-- Refresh a node's heartbeat, and answer what the node needs to know without
-- issuing further commands while idle: whether its channels have work, which
-- nodes are dead, and the control requests in its mailbox. Also releases
-- publication barriers whose publisher did not (it died): see hold.lua.
-- KEYS[1] node key, KEYS[2] nodes set, KEYS[3] control mailbox, KEYS[4] publishing zset,
-- KEYS[5] planned zset, KEYS[6] doorbell, KEYS[7] job index, KEYS[8] cancelled metric,
-- KEYS[9] cancelled-waiting counter, KEYS[10] attempts hash, KEYS[11] archive entries,
-- KEYS[12..] channel lists the node serves
-- ARGV[1] node id, ARGV[2] ttl ms, ARGV[3] description JSON, ARGV[4] key prefix,
-- ARGV[5] control requests to take (0: leave the mailbox alone)
-- Returns {1 if any served channel has ready jobs else 0, barriers released,
-- number of control requests k, k requests..., dead node ids...}
redis.call('SET', KEYS[1], ARGV[3], 'PX', ARGV[2])
redis.call('SADD', KEYS[2], ARGV[1])
local now = redis_now_ms()
local expired = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', now, 'LIMIT', 0, 500)
local released = 0
if #expired > 0 then
  redis.call('ZREM', KEYS[4], unpack(expired))
  released = release_all(expired, now, ARGV[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9], KEYS[10], KEYS[11])
end
local ready = 0
for i = 12, #KEYS do
  if redis.call('LLEN', KEYS[i]) > 0 then ready = 1; break end
end
local requests = {}
local take = tonumber(ARGV[5])
if take > 0 then requests = redis.call('LPOP', KEYS[3], take) or {} end
local out = { ready, released, #requests }
for _, r in ipairs(requests) do out[#out + 1] = r end
for _, id in ipairs(redis.call('SMEMBERS', KEYS[2])) do
  if redis.call('EXISTS', ARGV[4] .. 'node:' .. id) == 0 then out[#out + 1] = id end
end
return out
