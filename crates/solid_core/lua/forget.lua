-- Remove a job from the archive for good, and the lock an archived
-- `while: :until_done` unique job still holds (docs/unique.md).
-- KEYS[1] archive zset, KEYS[2] archive entries, KEYS[3] job index (names the prefix)
-- ARGV[1] job id
-- Returns 1 when the job was archived, else 0.
if redis.call('ZREM', KEYS[1], ARGV[1]) == 0 then
  redis.call('HDEL', KEYS[2], ARGV[1])
  return 0
end
release_archived_locks(prefix_of(KEYS[3]), KEYS[2], {ARGV[1]})
redis.call('HDEL', KEYS[2], ARGV[1])
return 1
