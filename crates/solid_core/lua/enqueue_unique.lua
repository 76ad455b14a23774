-- Enqueue (or plan) jobs of a unique task (docs/unique.md): each job is
-- written together with its lock, or not at all when the lock names a job
-- that is still live. Plain tasks never run this script.
-- KEYS[1] where the jobs go (the channel list when ARGV[1] is '', else the
-- planned zset), KEYS[2] channels set, KEYS[3] doorbell, KEYS[4] job index,
-- KEYS[5] archive zset
-- ARGV[1] '' ready now, else the delay in ms (due that long from now on
-- Redis' clock), ARGV[2] channel name, ARGV[3] lock time limit in ms (the
-- `for:` option; 0: none), ARGV[4] key prefix, ARGV[5..] triples: lock hex
-- name, job id, envelope (which names the same lock in meta.unique)
-- Returns, per job, the id it stands for: its own when it was written (or
-- was live already), the holder's when it is a duplicate.
--
-- A lock counts only while its holder is live: in the job index and not
-- cancelled, or (`:until_done`) in the archive. So a lock can never keep a
-- job from being enqueued after its holder is gone, whatever happened to
-- the holder; and the scripts that end a job release its lock, so none is
-- left behind once the jobs are done.
local planned = ARGV[1] ~= ''
local due = planned and (redis_now_ms() + tonumber(ARGV[1])) or nil
local state = (planned and 'planned|' or 'ready|') .. ARGV[2]
local ttl = tonumber(ARGV[3])
local out, fresh = {}, {}
for i = 5, #ARGV, 3 do
  local lock, id, env = ARGV[4] .. 'unique:' .. ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local holder = redis.call('GET', lock)
  local live = false
  if holder then
    local held = redis.call('HGET', KEYS[4], holder)
    live = held and not is_cancelled(held)
    if not live then
      local _, mode = unique_lock(env)
      live = mode == 'until_done' and redis.call('ZSCORE', KEYS[5], holder) ~= false
    end
  end
  if live then
    out[#out + 1] = holder
  else
    out[#out + 1] = id
    -- An id already live (the same publication sent again) is not written
    -- twice and takes no lock it does not already hold.
    if redis.call('HSETNX', KEYS[4], id, state) == 1 then
      if ttl > 0 then redis.call('SET', lock, id, 'PX', ttl) else redis.call('SET', lock, id) end
      fresh[#fresh + 1] = env
    end
  end
end
if #fresh == 0 then return out end
if planned then
  local args = {}
  for _, env in ipairs(fresh) do
    args[#args + 1] = due
    args[#args + 1] = ARGV[2] .. '|' .. env
  end
  redis.call('ZADD', KEYS[1], unpack(args))
  redis.call('SADD', KEYS[2], ARGV[2])
  local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  if tonumber(first[2]) >= due then redis.call('PUBLISH', KEYS[3], 'planned') end
  return out
end
local len = redis.call('LPUSH', KEYS[1], unpack(fresh))
redis.call('SADD', KEYS[2], ARGV[2])
if len == #fresh then redis.call('PUBLISH', KEYS[3], 'ready') end
return out
