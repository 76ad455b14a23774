-- Push ready envelopes onto one channel (LPUSH: claims pop from the right,
-- so the oldest job runs first).
-- KEYS[1] channel list, KEYS[2] channels set, KEYS[3] doorbell
-- ARGV[1] channel name, ARGV[2..] envelopes, validated by the caller
local pushed = #ARGV - 1
local len = redis.call('LPUSH', KEYS[1], unpack(ARGV, 2))
redis.call('SADD', KEYS[2], ARGV[1])
-- Idle nodes wait on the doorbell; a list that was non-empty already had
-- its ring, so only the empty -> non-empty transition publishes.
if len == pushed then redis.call('PUBLISH', KEYS[3], 'ready') end
return len
