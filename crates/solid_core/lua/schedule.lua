-- Plan envelopes for a later time.
-- KEYS[1] planned zset, KEYS[2] channels set, KEYS[3] doorbell
-- ARGV[1] due ms, ARGV[2] channel name, ARGV[3..] envelopes
local due = tonumber(ARGV[1])
local args = {}
for i = 3, #ARGV do
  args[#args + 1] = due
  args[#args + 1] = ARGV[2] .. '|' .. ARGV[i]
end
redis.call('ZADD', KEYS[1], unpack(args))
redis.call('SADD', KEYS[2], ARGV[2])
-- Schedulers sleep until the earliest due time they know; a new earliest
-- entry wakes them.
local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if tonumber(first[2]) >= due then redis.call('PUBLISH', KEYS[3], 'planned') end
return #ARGV - 2
