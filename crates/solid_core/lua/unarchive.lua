-- Put an archived job back on its channel. Returns 1, or 0 when the job is
-- no longer in the archive (already re-enqueued, or trimmed) or when a job
-- with its id is live again (then the archive entry stays).
-- KEYS[1] archive zset, KEYS[2] archive entries, KEYS[3] channel list,
-- KEYS[4] channels set, KEYS[5] doorbell, KEYS[6] job index
-- ARGV[1] job id, ARGV[2] route (channel name, or `name:p`
-- for the job's priority, with KEYS[3] that level's list), ARGV[3] envelope
if redis.call('ZSCORE', KEYS[1], ARGV[1]) == false then return 0 end
if redis.call('HSETNX', KEYS[6], ARGV[1], 'ready|' .. ARGV[2]) == 0 then return 0 end
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
if redis.call('LPUSH', KEYS[3], ARGV[3]) == 1 then ring(ARGV[2]) end
ring_channels(KEYS[5])
redis.call('SADD', KEYS[4], route_channel(prefix_of(KEYS[6]), ARGV[2]))
return 1
