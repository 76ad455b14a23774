-- Move a claimed job to the retry set. Returns 1, or 0 when the claim is stale.
-- Idempotent: the same retry of the same claim, sent again because its reply
-- was lost, finds its own marker and returns 1 without writing anything.
-- KEYS[1] node claims hash, KEYS[2] retrying zset, KEYS[3] doorbell, KEYS[4] stale metric,
-- KEYS[5] job index, KEYS[6] settled marker of this token, KEYS[7] retried metric
-- (a cumulative counter for /metrics: counted here, with the move, so it
-- is exact and costs no round trip; a resend finds its marker in take_claim
-- and does not count twice)
-- ARGV[1] token, ARGV[2] delay ms (due that long from now on Redis' clock), ARGV[3] `channel|envelope`, ARGV[4] job id, ARGV[5] channel
local claim = take_claim(KEYS[1], ARGV[1], KEYS[6], 'retry', KEYS[4])
if claim ~= 'taken' then return claim == 'done' and 1 or 0 end
-- Concurrency limits (decision 39): a waiting retry holds no slot. The
-- envelope the node re-encoded keeps its meta (order preserved), so its
-- flow object names the key; released only when the claim was taken here.
release_slot_of(prefix_of(KEYS[5]), KEYS[5], ARGV[3], ARGV[1])
ring_channels(KEYS[3])
local due = redis_now_ms() + tonumber(ARGV[2])
redis.call('ZADD', KEYS[2], due, ARGV[3])
redis.call('HSET', KEYS[5], ARGV[4], 'retrying|' .. ARGV[5])
redis.call('INCR', KEYS[7])
local first = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
if tonumber(first[2]) >= due then redis.call('PUBLISH', KEYS[3], 'planned') end
return 1
