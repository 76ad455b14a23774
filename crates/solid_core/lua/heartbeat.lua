-- Refresh a node's heartbeat, and answer what the node needs to know without
-- issuing further commands while idle.
-- KEYS[1] node key, KEYS[2] nodes set, KEYS[3..] channel lists the node serves
-- ARGV[1] node id, ARGV[2] ttl ms, ARGV[3] description JSON, ARGV[4] key prefix
-- Returns {1 if any served channel has ready jobs else 0, dead node ids...}
redis.call('SET', KEYS[1], ARGV[3], 'PX', ARGV[2])
redis.call('SADD', KEYS[2], ARGV[1])
local ready = 0
for i = 3, #KEYS do
  if redis.call('LLEN', KEYS[i]) > 0 then ready = 1; break end
end
local out = { ready }
for _, id in ipairs(redis.call('SMEMBERS', KEYS[2])) do
  if redis.call('EXISTS', ARGV[4] .. 'node:' .. id) == 0 then out[#out + 1] = id end
end
return out
