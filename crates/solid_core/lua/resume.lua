-- Resume a paused channel: byte 0 of `flow:<name>` is no longer `P`, so the
-- next claim of every node visits it again. Idle fetchers wait on the
-- doorbell (a short claim that skipped a paused channel still means
-- "nothing claimable"), so resume rings it when the channel holds ready
-- jobs: they start at once, not at the next heartbeat.
-- KEYS[1] flow:<name>, KEYS[2] paused hash, KEYS[3] the channel's list,
-- KEYS[4] doorbell (the ring goes to the channel's own `doorbell:<name>`:
-- only nodes serving it can claim its jobs)
-- ARGV[1] channel name
-- Returns 1 when the channel was paused, 0 when it was not.
local flow = redis.call('GET', KEYS[1])
local was = redis.call('HDEL', KEYS[2], ARGV[1])
if flow and string.sub(flow, 1, 1) == 'P' then was = 1 end
if not flow then return was end
if #flow <= 1 then
  -- Nothing else is recorded for the channel: claims go back to paying
  -- nothing for it (no MGET value, no reply trailer).
  redis.call('DEL', KEYS[1])
else
  redis.call('SETRANGE', KEYS[1], 0, '-')
end
-- The base list, then the priority levels the string says are in use
-- (bytes 1..10 = levels 0..9; level 5 is the base list).
local ready = redis.call('LLEN', KEYS[3]) > 0
for level = 0, 9 do
  if ready then break end
  if level ~= 5 and string.sub(flow, level + 2, level + 2) == '1' then
    ready = redis.call('LLEN', KEYS[3] .. ':' .. level) > 0
  end
end
if ready then redis.call('PUBLISH', KEYS[4] .. ':' .. ARGV[1], 'ready') end
return was
