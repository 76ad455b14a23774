-- Lift the publication barrier for held publications (see hold.lua): each
-- becomes ready on its channel, or planned when due later. A member already
-- released (its barrier expired first) is skipped, so each job is released
-- exactly once.
-- KEYS[1] publishing zset, KEYS[2] planned zset, KEYS[3] doorbell, KEYS[4] job index,
-- KEYS[5] cancelled metric, KEYS[6] cancelled-waiting counter, KEYS[7] attempts hash,
-- KEYS[8] archive entries
-- ARGV[1] key prefix, ARGV[2..] members (`due_ms|channel|envelope`, due on
-- Redis' clock as hold.lua wrote it)
-- Returns the number released.
local held = {}
for i = 2, #ARGV do
  if redis.call('ZREM', KEYS[1], ARGV[i]) == 1 then held[#held + 1] = ARGV[i] end
end
local n = release_all(held, redis_now_ms(), ARGV[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8])
ring_channels(KEYS[3])
return n
