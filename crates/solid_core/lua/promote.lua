-- Move due planned and retrying jobs to their channels. Safe when several
-- nodes run it at once: each member is removed and pushed inside this one
-- atomic script, so it is promoted exactly once.
-- KEYS[1] planned zset, KEYS[2] retrying zset, KEYS[3] doorbell,
-- KEYS[4] archive entries (for malformed members), KEYS[5] job index,
-- KEYS[6] cancelled metric, KEYS[7] cancelled-waiting counter, KEYS[8] attempts hash
-- ARGV[1] max members per set, ARGV[2] key prefix, ARGV[3] '1' to wake
-- throttled keys too (`flow:wake`: the node heard a `throttled` ring since
-- its last promotion that found none)
-- Returns {promoted, milliseconds until the next due member or -1, 1 when
-- (ARGV[3] = '1') throttled keys still wait for a wake}: a delay, not a
-- time, so the caller can wait for it on its own clock.
local now = redis_now_ms()
local moved = 0
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
        if redis.call('LPUSH', ARGV[2] .. 'channel:' .. channel, env) == 1 then ring(channel) end
        moved = moved + 1
      end
    else
      redis.call('HSET', KEYS[4], 'malformed:' .. redis.sha1hex(m),
        cjson.encode({ reason = 'malformed planned entry (no channel)', raw = m, discarded_ms = now }))
    end
  end
end
-- >>> rate limits (decision 42): keys whose oldest throttled job may be
-- admitted by now. Each due key's member is removed and as many of its
-- throttled jobs as its log has room for (at least one) go back to the
-- heads of their lists, oldest first; the claim that meets them admits or
-- throttles them again (an early wake costs work, never the limit). A key
-- with jobs left gets its next wake: when the log entry the moved jobs do
-- not replace leaves the window. A node that heard no `throttled` ring
-- since a promotion found no wake left passes '0' and runs none of this,
-- so namespaces without rate limits pay nothing.
local wake_key = ARGV[2] .. 'flow:wake'
if ARGV[3] == '1' then
  for _, hex in ipairs(redis.call('ZRANGEBYSCORE', wake_key, '-inf', now, 'LIMIT', 0, 100)) do
    redis.call('ZREM', wake_key, hex)
    local list, log = 'throttled:' .. hex, ARGV[2] .. 'rate:' .. hex
    local oldest = redis.call('LINDEX', ARGV[2] .. list, -1)
    local f = oldest and flow_of(string.sub(oldest, (string.find(oldest, '|', 1, true) or 0) + 1))
    if oldest then
      local len = redis.call('LLEN', log)
      local room, rw = 1, f and f.rw or 0
      if f and f.r then
        local expired = 0
        while expired < math.min(len, 100) do
          local at = tonumber(redis.call('LINDEX', log, expired))
          if not at or at > now - rw then break end
          expired = expired + 1
        end
        local free = math.max(f.rl - len, 0)
        room = math.min(math.max(free + expired, 1), 100)
        -- `room` admissions take the free places, then replace the oldest
        -- (expired) entries: the first entry left is the next to expire,
        -- and with none left the moved jobs' own entries (about now) are.
        local next_at = redis.call('LINDEX', log, math.min(math.max(room - free, 0), expired))
        move_back_many(ARGV[2], KEYS[5], list, room)
        if redis.call('EXISTS', ARGV[2] .. list) == 1 then
          local at = next_at and tonumber(next_at) or now
          -- More room than one call moves: wake again at once.
          if free + expired > 100 then at = now - rw end
          redis.call('ZADD', wake_key, 'LT', math.max(at + rw, now + 1), hex)
        end
      else
        move_back(ARGV[2], KEYS[5], list)
      end
    end
  end
end
-- <<< rate limits
ring_channels(KEYS[3])
local next_due = -1
for k = 1, 2 do
  local first = redis.call('ZRANGE', KEYS[k], 0, 0, 'WITHSCORES')
  if first[2] then
    local s = tonumber(first[2])
    if next_due < 0 or s < next_due then next_due = s end
  end
end
local waking = 0
if ARGV[3] == '1' then
  local first = redis.call('ZRANGE', wake_key, 0, 0, 'WITHSCORES')
  if first[2] then
    waking = 1
    if next_due < 0 or tonumber(first[2]) < next_due then next_due = tonumber(first[2]) end
  end
end
if next_due >= 0 then next_due = math.max(next_due - now, 0) end
return {moved, next_due, waking}
