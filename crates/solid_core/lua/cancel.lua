-- Cancel a waiting job: it is marked in the job index, and the claim or
-- promotion that meets it drops it instead of running it.
-- KEYS[1] job index, KEYS[2] cancelled-waiting counter, KEYS[3] nodes set
-- ARGV[1] job id, ARGV[2] key prefix
-- Returns 1 cancelled, 0 unknown or already cancelled, or a RUNNING error
-- when the job is claimed (running). Not BUSY: Redis itself answers BUSY
-- while a script runs too long, and the two must not be confused.
local state = redis.call('HGET', KEYS[1], ARGV[1])
if not state or is_cancelled(state) then return 0 end
if claimed_by(KEYS[3], ARGV[2], ARGV[1]) then
  return redis.error_reply('RUNNING job ' .. ARGV[1] .. ' is running and cannot be cancelled')
end
redis.call('HSET', KEYS[1], ARGV[1], 'cancelled|' .. state)
-- A blocked job (concurrency limits) or a throttled one (rate limits) is
-- met by the script that moves it back (move_back drops it), never by a
-- claim: it is not counted as a cancelled job a claim must look for.
if string.sub(state, 1, 8) ~= 'blocked|' and string.sub(state, 1, 10) ~= 'throttled|' then
  redis.call('INCR', KEYS[2])
end
return 1
