-- Plan envelopes for a later time; an id already live is skipped.
-- KEYS[1] planned zset, KEYS[2] channels set, KEYS[3] doorbell, KEYS[4] job index
-- ARGV[1] delay ms (the job is due that long from now on Redis' clock),
-- ARGV[2] route (channel name, or `name:p`: promotion pushes to that
-- level's list), ARGV[3..] envelopes
-- Returns the number of envelopes planned.
local due = redis_now_ms() + tonumber(ARGV[1])
local args = {}
for _, env in ipairs(register_fresh(KEYS[4], ARGV, 3, 'planned|' .. ARGV[2])) do
  args[#args + 1] = due
  args[#args + 1] = ARGV[2] .. '|' .. env
end
if #args == 0 then return 0 end
redis.call('ZADD', KEYS[1], unpack(args))
redis.call('SADD', KEYS[2], route_channel(prefix_of(KEYS[4]), ARGV[2]))
-- Schedulers sleep until the earliest due time they know; a new earliest
-- entry wakes them.
local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if tonumber(first[2]) >= due then redis.call('PUBLISH', KEYS[3], 'planned') end
return #args / 2
