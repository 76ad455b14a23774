-- Enqueue (or plan) jobs of a unique task (docs/unique.md): each job is
-- written together with its lock, or not at all when the lock names a job
-- that is still live. Plain tasks never run this script.
-- KEYS[1] where the jobs go (the channel list when ARGV[1] is '', else the
-- planned zset), KEYS[2] channels set, KEYS[3] doorbell (`ready` goes to its
-- per-channel `doorbell:<name>`), KEYS[4] job index,
-- KEYS[5] archive zset
-- ARGV[1] '' ready now, else the delay in ms (due that long from now on
-- Redis' clock), ARGV[2] route (channel name, or `name:p`), ARGV[3] lock time limit in ms (the
-- `for:` option; 0: none), ARGV[4] key prefix, ARGV[5] archive_max_age in
-- ms, ARGV[6..] triples: lock hex name, job id, envelope (which names the
-- same lock in meta.unique)
-- Returns, per job, the id it stands for: its own when it was written (or
-- was live already), the holder's when it is a duplicate.
--
-- A lock counts only while its holder is live: in the job index and not
-- cancelled, or (`:until_done`) in the archive for less than
-- archive_max_age, measured from the archive zset's score (the archive
-- time, on Redis' clock) to Redis' now. So a lock can never keep a job from
-- being enqueued after its holder is gone, whatever happened to the holder,
-- and an archived holder stops counting at the age the archive promises to
-- drop it, whether or not a later discard trimmed the archive since (the
-- trim runs only inside discard.lua); a lock that does not count is taken
-- over here. The scripts that end a job release its lock, so none is left
-- behind once the jobs are done.
local planned = ARGV[1] ~= ''
local now = planned and redis_now_ms() or nil
local due = planned and (now + tonumber(ARGV[1])) or nil
local state = (planned and 'planned|' or 'ready|') .. ARGV[2]
local ttl = tonumber(ARGV[3])
local max_age = tonumber(ARGV[5])
local out, fresh = {}, {}
local locks, ids, envs = {}, {}, {}
for i = 6, #ARGV, 3 do
  locks[#locks + 1] = ARGV[4] .. 'unique:' .. ARGV[i]
  ids[#ids + 1] = ARGV[i + 1]
  envs[#envs + 1] = ARGV[i + 2]
end
-- Reads for the whole batch at once: MGET of the locks, one HMGET of
-- their holders' job-index entries and one of the new ids' (a call per job
-- would be most of a bulk enqueue's cost, as in register_fresh).
local holders = redis.call('MGET', unpack(locks))
local asked, holder_state = {}, {}
for _, h in ipairs(holders) do
  if h and not holder_state[h] then
    holder_state[h] = false
    asked[#asked + 1] = h
  end
end
if #asked > 0 then
  local states = redis.call('HMGET', KEYS[4], unpack(asked))
  for k, h in ipairs(asked) do holder_state[h] = states[k] end
end
-- One job: HSETNX below checks and registers its id at once.
local single = #ids == 1
local id_states = single and {} or redis.call('HMGET', KEYS[4], unpack(ids))
-- Whether archived holder `h` still counts, asked once per holder. TIME
-- only when an archived holder is met, so a duplicate of a queued or
-- running job still costs MGET and HMGET alone.
local archived_live = {}
local function archived_counts(h)
  if archived_live[h] == nil then
    local at = redis.call('ZSCORE', KEYS[5], h)
    if at then
      now = now or redis_now_ms()
      archived_live[h] = tonumber(at) > now - max_age
    else
      archived_live[h] = false
    end
  end
  return archived_live[h]
end
local taken, fields, lock_writes = {}, {}, {}
for k = 1, #locks do
  local lock, id, env = locks[k], ids[k], envs[k]
  local holder = taken[lock]
  if not holder and holders[k] then
    local h = holders[k]
    local held = holder_state[h]
    local live = held and not is_cancelled(held)
    if not live then
      local _, mode = unique_lock(env)
      live = mode == 'until_done' and archived_counts(h)
    end
    if live then holder = h end
  end
  if holder then
    out[k] = holder
  else
    out[k] = id
    -- An id already live (the same publication sent again) is not written
    -- twice and takes no lock it does not already hold.
    local new_id
    if single then
      new_id = redis.call('HSETNX', KEYS[4], id, state) == 1
    else
      new_id = not id_states[k]
      if new_id then
        fields[#fields + 1] = id
        fields[#fields + 1] = state
      end
    end
    if new_id then
      taken[lock] = id
      lock_writes[#lock_writes + 1] = lock
      lock_writes[#lock_writes + 1] = id
      fresh[#fresh + 1] = env
    end
  end
end
if #fields > 0 then redis.call('HSET', KEYS[4], unpack(fields)) end
if #lock_writes > 0 then
  if ttl > 0 then
    for k = 1, #lock_writes, 2 do redis.call('SET', lock_writes[k], lock_writes[k + 1], 'PX', ttl) end
  elseif #lock_writes == 2 then
    redis.call('SET', lock_writes[1], lock_writes[2])
  else
    redis.call('MSET', unpack(lock_writes))
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
  redis.call('SADD', KEYS[2], route_channel(prefix_of(KEYS[4]), ARGV[2]))
  local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  if tonumber(first[2]) >= due then redis.call('PUBLISH', KEYS[3], 'planned') end
  return out
end
local len = redis.call('LPUSH', KEYS[1], unpack(fresh))
redis.call('SADD', KEYS[2], route_channel(prefix_of(KEYS[4]), ARGV[2]))
if len == #fresh then ring(ARGV[2]) end
ring_channels(KEYS[3])
return out
