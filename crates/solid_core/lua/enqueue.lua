-- Push ready envelopes onto one channel (LPUSH: claims pop from the right,
-- so the oldest job runs first). An envelope whose id is already live (in
-- the job index) is skipped: enqueueing the same job twice is a no-op.
-- KEYS[1] channel list, KEYS[2] channels set, KEYS[3] doorbell (the ring goes
-- to its per-channel `doorbell:<name>`), KEYS[4] job index
-- ARGV[1] route (channel name, or `name:p` with KEYS[1] that level's list),
-- ARGV[2..] envelopes, validated by the caller
-- Returns the number of envelopes pushed.
local fresh = register_fresh(KEYS[4], ARGV, 2, 'ready|' .. ARGV[1])
if #fresh == 0 then return 0 end
local len = redis.call('LPUSH', KEYS[1], unpack(fresh))
redis.call('SADD', KEYS[2], route_channel(prefix_of(KEYS[4]), ARGV[1]))
-- Idle nodes serving the channel wait on its doorbell; a list that was
-- non-empty already had its ring, so only the empty -> non-empty
-- transition publishes.
if len == #fresh then ring(ARGV[1]) end
ring_channels(KEYS[3])
return #fresh
