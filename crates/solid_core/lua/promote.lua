-- Move due planned and retrying jobs to their channels. Safe when several
-- nodes run it at once: each member is removed and pushed inside this one
-- atomic script, so it is promoted exactly once.
-- KEYS[1] planned zset, KEYS[2] retrying zset, KEYS[3] doorbell,
-- KEYS[4] archive entries (for malformed members), KEYS[5] job index,
-- KEYS[6] cancelled metric, KEYS[7] cancelled-waiting counter, KEYS[8] attempts hash
-- ARGV[1] max members per set, ARGV[2] key prefix
-- Returns {promoted, milliseconds until the next due member or -1}: a delay,
-- not a time, so the caller can wait for it on its own clock.
local now = redis_now_ms()
local moved, rang = 0, false
for k = 1, 2 do
  local items = redis.call('ZRANGEBYSCORE', KEYS[k], '-inf', now, 'LIMIT', 0, tonumber(ARGV[1]))
  for _, m in ipairs(items) do
    redis.call('ZREM', KEYS[k], m)
    local sep = string.find(m, '|', 1, true)
    if sep then
      local channel, env = string.sub(m, 1, sep - 1), string.sub(m, sep + 1)
      local id = job_id(env)
      if id and is_cancelled(redis.call('HGET', KEYS[5], id)) then
        release_lock(ARGV[2], env, id)
        redis.call('HDEL', KEYS[5], id)
        redis.call('HDEL', KEYS[8], id)
        redis.call('INCR', KEYS[6])
        redis.call('DECR', KEYS[7])
      else
        if id then redis.call('HSET', KEYS[5], id, 'ready|' .. channel) end
        if redis.call('LPUSH', ARGV[2] .. 'channel:' .. channel, env) == 1 then rang = true end
        moved = moved + 1
      end
    else
      redis.call('HSET', KEYS[4], 'malformed:' .. redis.sha1hex(m),
        cjson.encode({ reason = 'malformed planned entry (no channel)', raw = m, discarded_ms = now }))
    end
  end
end
if rang then redis.call('PUBLISH', KEYS[3], 'ready') end
local next_due = -1
for k = 1, 2 do
  local first = redis.call('ZRANGE', KEYS[k], 0, 0, 'WITHSCORES')
  if first[2] then
    local s = tonumber(first[2])
    if next_due < 0 or s < next_due then next_due = s end
  end
end
if next_due >= 0 then next_due = math.max(next_due - now, 0) end
return {moved, next_due}
