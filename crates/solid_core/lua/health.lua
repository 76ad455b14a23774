-- What a health check reads, in one round trip and on Redis' clock: the
-- time, and for every registered node the remaining life of its heartbeat
-- key and the description its heartbeat wrote. Reads only.
-- KEYS[1] nodes set; ARGV[1] key prefix, ARGV[2] most nodes to report
-- Returns {now ms, nodes registered, id, pttl ms (-2: expired), description or false, ...}
local now = redis_now_ms()
local ids = redis.call('SMEMBERS', KEYS[1])
local out = { now, #ids }
local limit = tonumber(ARGV[2])
for i, id in ipairs(ids) do
  if i > limit then break end
  local key = ARGV[1] .. 'node:' .. id
  out[#out + 1] = id
  out[#out + 1] = redis.call('PTTL', key)
  out[#out + 1] = redis.call('GET', key)
end
return out
