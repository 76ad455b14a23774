-- Shared by every script that touches the job index (prepended in
-- scripts.rs). The job index `jobs` maps a job id to `state|channel[|node|token]`
-- while the job is live; it gives deduplication, get and cancel in O(1).
--
-- The id of an envelope: SolidJobs writes `{"id":"<36 chars>",...` first, so
-- it is read without decoding; any other producer's envelope is decoded.
local function job_id(env)
  if string.sub(env, 1, 7) == '{"id":"' and string.sub(env, 44, 44) == '"' then
    return string.sub(env, 8, 43)
  end
  local ok, decoded = pcall(cjson.decode, env)
  if ok and type(decoded) == 'table' and type(decoded.id) == 'string' then return decoded.id end
  return nil
end

-- Registers the envelopes `envs[from..]` in the job index as `state`, in one
-- HMGET and one HSET whatever the batch size (a call per envelope was most of
-- a bulk enqueue's cost). An id already live, or repeated earlier in the same
-- batch, is skipped: enqueueing the same job twice is a no-op. Envelopes
-- without a readable id are kept (they are quarantined when claimed).
-- Returns the envelopes to write.
local function register_fresh(index, envs, from, state)
  local ids, wanted = {}, {}
  for i = from, #envs do
    local id = job_id(envs[i])
    ids[i] = id
    if id then wanted[#wanted + 1] = id end
  end
  if #wanted == 1 and #envs == from then
    -- A single enqueue: one HSETNX does the check and the write.
    if redis.call('HSETNX', index, wanted[1], state) == 1 then return {envs[from]} end
    return {}
  end
  local live = {}
  if #wanted > 0 then
    local states = redis.call('HMGET', index, unpack(wanted))
    for k, id in ipairs(wanted) do
      if states[k] then live[id] = true end
    end
  end
  local fresh, fields = {}, {}
  for i = from, #envs do
    local id = ids[i]
    if not id then
      fresh[#fresh + 1] = envs[i]
    elseif not live[id] then
      live[id] = true
      fresh[#fresh + 1] = envs[i]
      fields[#fields + 1] = id
      fields[#fields + 1] = state
    end
  end
  if #fields > 0 then redis.call('HSET', index, unpack(fields)) end
  return fresh
end

-- Unique jobs (docs/unique.md). The lock a unique job's envelope names:
-- its `meta` is the envelope's last field and `unique` its last key, so the
-- lock is read from the envelope's end. A plain envelope ends with a
-- number and `}`: one byte compared, no command, for every job without it.
-- Returns the lock's hex name and its mode (queued, running, until_done).
local function unique_lock(env)
  if string.byte(env, -2) ~= 125 then return nil end
  return string.match(string.sub(env, -100), '"unique":{"lock":"(%x+)","while":"([%l_]+)"}}}$')
end

-- The key prefix, from the job index key (`<prefix>jobs`) every script
-- that moves jobs already receives.
local function prefix_of(index)
  return string.sub(index, 1, #index - 4)
end

-- Releases the lock `env` names if job `id` still holds it. Compare and
-- delete: a lock taken over by another job (after `for:` expired, or after
-- this job was cancelled) names that job and is left alone, so a late or
-- repeated release can never free another job's lock.
local function release_lock(prefix, env, id)
  local hex = unique_lock(env)
  if not hex or not id then return end
  local lock = prefix .. 'unique:' .. hex
  if redis.call('GET', lock) == id then redis.call('DEL', lock) end
end

-- Releases the locks of archived `:until_done` jobs whose archive entries
-- (`ids`, in the archive entries hash `entries`) are about to be removed
-- (trimmed or deleted): the job is gone for good, so is its lock. One HMGET
-- per trim; a record is decoded only when it mentions `unique`.
local function release_archived_locks(prefix, entries, ids)
  local records = redis.call('HMGET', entries, unpack(ids))
  for k, rec in ipairs(records) do
    if rec and string.find(rec, 'unique', 1, true) then
      local ok, decoded = pcall(cjson.decode, rec)
      if ok and type(decoded) == 'table' and type(decoded.raw) == 'string' then
        release_lock(prefix, decoded.raw, ids[k])
      end
    end
  end
end

-- Milliseconds since the epoch on Redis' clock (TIME). Every time a script
-- compares or stores for scheduling is read here, never taken from an
-- argument: worker and producer clocks may be skewed (docs/reliability.md,
-- "Clocks"). Script effects are replicated, so replicas and the AOF get the
-- values written, not the call.
local function redis_now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Targeted doorbells (decision 50): a `ready` ring goes to
-- `<ns>:doorbell:<channel>`, which only the nodes serving that channel
-- listen on, so one enqueue no longer wakes every idle node of the
-- namespace. Each push that takes a ready list from empty to non-empty
-- records its channel here (`ring`); the script publishes once per
-- distinct channel at its end (`ring_channels`), wherever in the script
-- the pushes happened. A route `name:p` rings `name`: a node subscribes
-- to the channels it serves, whose claims visit every level list.
local rings, ring_order = {}, {}
local function ring(route)
  local name = string.match(route, '^[^:]+') or route
  if not rings[name] then
    rings[name] = true
    ring_order[#ring_order + 1] = name
  end
end

-- Publishes `ready` on `<doorbell>:<channel>` for every channel `ring`
-- recorded, once each, and forgets them (a second call publishes nothing).
-- `doorbell` is the namespace's `<ns>:doorbell`.
local function ring_channels(doorbell)
  for _, name in ipairs(ring_order) do redis.call('PUBLISH', doorbell .. ':' .. name, 'ready') end
  rings, ring_order = {}, {}
end

local function is_cancelled(state)
  return state and string.sub(state, 1, 9) == 'cancelled'
end

-- ---------------------------------------------------------------------
-- Flow control: concurrency limits (docs/flow-control.md, decision 39).
-- A slot is a claim token in the set `slots:<hex>`: added by the claim
-- that records the claim, removed by the script that removes the claim
-- record, in the same atomic call. So a slot exists exactly while its
-- claim does: nothing expires, nothing leaks when a node dies (its claims
-- are recovered, and their slots with them).
-- ---------------------------------------------------------------------

-- The flow object of an envelope (meta.flow), or nil: nil for every
-- envelope whose second-last byte is not `}` (plain jobs: one byte
-- compared, no command). The object is anchored at the envelope's end
-- (meta's last key, or just before `unique`), and its characters
-- (letters, digits, `"`, `:`, `,`) exclude the backslash, so no argument
-- can imitate it: inside a JSON string its quotes would be escaped.
-- Returns {c = concurrency key hex, cl = limit, r = rate key hex,
-- rl = rate limit, rw = window ms}, each group optional.
local function flow_of(env)
  if string.byte(env, -2) ~= 125 then return nil end
  local tail = string.sub(env, -300)
  local body = string.match(tail, '"flow":{([%w":,]*)}}}$')
    or string.match(tail, '"flow":{([%w":,]*)},"unique":{"lock":"%x+","while":"[%l_]+"}}}$')
  if not body then return nil end
  local f = {
    c = string.match(body, '"c":"(%x+)"'),
    cl = tonumber(string.match(body, '"cl":(%d+)')),
    r = string.match(body, '"r":"(%x+)"'),
    rl = tonumber(string.match(body, '"rl":(%d+)')),
    rw = tonumber(string.match(body, '"rw":(%d+)')),
  }
  if not f.cl then f.c = nil end
  if not (f.rl and f.rw) then f.r = nil end
  return f
end

-- Moves the `n` oldest jobs of `list` (a `blocked:<hex>` or
-- `throttled:<hex>` list of `route|env` records, newest left) back to the
-- heads of their ready lists, keeping their order (RPUSH: the oldest is
-- the next popped), so a blocked job is claimable the moment a slot frees
-- and a throttled one when its rate has room. A job cancelled while it
-- waited there (cancel.lua marks it, and counts no cancelling: no claim
-- meets it) is dropped here and does not count against `n`, at most 1,000
-- per call (the claim's blocked budget).
--
-- A dropped job of a concurrency-limited key may be the one a released
-- slot moved back (the baton: it went on to be throttled), so when it
-- leaves a throttled list its key's next blocked job is moved back in its
-- place. Without that, the key's blocked jobs waited for a slot release
-- that never came, with the slot free. An extra move back costs one look
-- of a claim (which blocks the job again if no slot is free); a lost one
-- stalls the key. (A blocked list passes the baton by taking the next job.)
-- At most 1,000 jobs dropped or passed over (paused) per call.
-- A ready list that went from empty to non-empty has its channel recorded
-- for the script's `ring_channels`.
local function move_back_many(prefix, index, list, n)
  local kept, dropped, counted = {}, 0, 0
  local throttled = string.sub(list, 1, 10) == 'throttled:'
  -- A job of a paused channel goes back to its list (where it waits for
  -- the resume like any ready job) but does not count against `n`: no
  -- claim meets it, so the slot (or the rate's room) it was moved back
  -- for goes on to the next job, maybe of another channel sharing the key.
  local paused = {}
  local function in_paused_channel(route)
    local channel = string.match(route, '^[^:]+')
    if paused[channel] == nil then
      local flow = redis.call('GET', prefix .. 'flow:' .. channel)
      paused[channel] = (flow and string.byte(flow, 1) == 80) or false -- 'P'
    end
    return paused[channel]
  end
  while counted < n and dropped < 1000 do
    local recs = redis.call('RPOP', prefix .. list, n - counted)
    if not recs then break end
    for _, rec in ipairs(recs) do
      local sep = string.find(rec, '|', 1, true)
      if sep then
        local route, env = string.sub(rec, 1, sep - 1), string.sub(rec, sep + 1)
        local id = job_id(env)
        if id and is_cancelled(redis.call('HGET', index, id)) then
          release_lock(prefix, env, id)
          redis.call('HDEL', index, id)
          redis.call('HDEL', prefix .. 'attempts', id)
          redis.call('INCR', prefix .. 'metric:cancelled')
          dropped = dropped + 1
          local f = throttled and flow_of(env)
          if f and f.c then move_back_many(prefix, index, 'blocked:' .. f.c, 1) end
        else
          if id then redis.call('HSET', index, id, 'ready|' .. route) end
          kept[#kept + 1] = { route, env }
          if in_paused_channel(route) then dropped = dropped + 1 else counted = counted + 1 end
        end
      else
        dropped = dropped + 1
      end
    end
  end
  for k = #kept, 1, -1 do
    if redis.call('RPUSH', prefix .. 'channel:' .. kept[k][1], kept[k][2]) == 1 then ring(kept[k][1]) end
  end
end

-- The oldest job of `list` (see move_back_many).
local function move_back(prefix, index, list)
  move_back_many(prefix, index, list, 1)
end

-- Releases claim `token`'s slot of concurrency key `hex` and hands it on
-- to the oldest blocked job of that key. A token the set does not hold
-- (a claim made before this feature, which took no slot; or a settle
-- already applied) passes no baton: SREM returned 0, nothing moves.
-- A ready list it rings is recorded (see move_back_many).
local function release_slot(prefix, index, hex, token)
  if redis.call('SREM', prefix .. 'slots:' .. hex, token) == 0 then return end
  move_back(prefix, index, 'blocked:' .. hex)
end

-- release_slot for the record or envelope `rec` of claim `token`, when
-- its job is concurrency limited; plain jobs cost one byte compared.
local function release_slot_of(prefix, index, rec, token)
  local f = flow_of(rec)
  if not f or not f.c then return end
  release_slot(prefix, index, f.c, token)
end

-- ------------------------------------------------------ end flow control

-- Removes cancelled jobs from `envs` (forgetting them in the index and the
-- failure records, and counting them); returns the envelopes to keep. A
-- blocked job moved back that rings its ready list is recorded (`ring`).
local function drop_cancelled(envs, index, metric, waiting, attempts)
  local ids, lookup = {}, {}
  for j, env in ipairs(envs) do
    ids[j] = job_id(env)
    if ids[j] then lookup[#lookup + 1] = ids[j] end
  end
  if #lookup == 0 then return envs end
  local states = redis.call('HMGET', index, unpack(lookup))
  local cancelled = {}
  for k, id in ipairs(lookup) do
    if is_cancelled(states[k]) then cancelled[id] = true end
  end
  local keep, dropped = {}, {}
  for j, env in ipairs(envs) do
    if ids[j] and cancelled[ids[j]] then
      dropped[#dropped + 1] = ids[j]
      -- A cancelled unique job never runs: its lock goes with it.
      release_lock(prefix_of(index), env, ids[j])
      -- A limited job may be one a released slot moved back (the baton):
      -- dropped, it passes the baton on to its key's next blocked job.
      local f = flow_of(env)
      if f and f.c then move_back(prefix_of(index), index, 'blocked:' .. f.c) end
    else
      keep[#keep + 1] = env
    end
  end
  if #dropped > 0 then
    redis.call('HDEL', index, unpack(dropped))
    redis.call('HDEL', attempts, unpack(dropped))
    redis.call('INCRBY', metric, #dropped)
    redis.call('DECRBY', waiting, #dropped)
  end
  return keep
end

-- The node whose claim hash holds job `id`, and the claim's token (an
-- O(claims) scan: claims are bounded by the nodes' prefetch windows; for get
-- and cancel only). A record merely mentioning the id (in its arguments) is
-- not a match: the candidate's own id is read and compared.
local function claimed_by(nodes_key, prefix, id)
  for _, node in ipairs(redis.call('SMEMBERS', nodes_key)) do
    local all = redis.call('HGETALL', prefix .. 'claims:' .. node)
    for i = 1, #all, 2 do
      local rec = all[i + 1]
      if string.find(rec, id, 1, true) then
        local s1 = string.find(rec, '|', 1, true)
        local s2 = s1 and string.find(rec, '|', s1 + 1, true)
        if s2 and job_id(string.sub(rec, s2 + 1)) == id then return node, all[i] end
      end
    end
  end
  return nil
end

-- Takes claim `token` out of a node's claim hash for settle `op` (retry,
-- discard). Returns 'taken' (go on), 'done' (this same settle already went
-- through: it was resent after its reply was lost) or 'stale' (recovered;
-- counted, nothing written).
local function take_claim(claims, token, marker, op, stale_metric)
  if redis.call('HDEL', claims, token) == 1 then
    redis.call('SET', marker, op, 'PX', 600000)
    return 'taken'
  end
  if redis.call('GET', marker) == op then return 'done' end
  redis.call('INCR', stale_metric)
  return 'stale'
end

-- Makes one held publication visible (the publication barrier: see
-- hold.lua). `member` is `due_ms|channel|envelope`, already removed from the
-- publishing set by the caller. A job cancelled meanwhile is dropped, as
-- promote.lua drops it; a job due later goes to `planned`. Returns 'ready'
-- (its channel, when it went from empty to non-empty, is recorded for
-- `ring_channels`), 'planned', 'dropped' or 'malformed'.
local function release_held(member, now, prefix, planned, index, cancelled_metric, cancelling, attempts, archive_entries)
  local s1 = string.find(member, '|', 1, true)
  local s2 = s1 and string.find(member, '|', s1 + 1, true)
  if not s2 then
    redis.call('HSET', archive_entries, 'malformed:' .. redis.sha1hex(member),
      cjson.encode({ reason = 'malformed held publication', raw = member, discarded_ms = now }))
    return 'malformed'
  end
  local due = tonumber(string.sub(member, 1, s1 - 1)) or 0
  local channel, env = string.sub(member, s1 + 1, s2 - 1), string.sub(member, s2 + 1)
  local id = job_id(env)
  if id and is_cancelled(redis.call('HGET', index, id)) then
    release_lock(prefix, env, id)
    redis.call('HDEL', index, id)
    redis.call('HDEL', attempts, id)
    redis.call('INCR', cancelled_metric)
    redis.call('DECR', cancelling)
    return 'dropped'
  end
  if due > now then
    redis.call('ZADD', planned, due, channel .. '|' .. env)
    return 'planned'
  end
  if id then redis.call('HSET', index, id, 'ready|' .. channel) end
  if redis.call('LPUSH', prefix .. 'channel:' .. channel, env) == 1 then ring(channel) end
  return 'ready'
end

-- Releases every member of `held` (publishing set members) that the caller
-- removed, ringing `planned` once; the channels that became non-empty are
-- recorded for the caller's `ring_channels`. Returns how many became visible.
local function release_all(held, now, prefix, planned, doorbell, index, cancelled_metric, cancelling, attempts, archive_entries)
  local n, earliest = 0, nil
  for _, member in ipairs(held) do
    local out = release_held(member, now, prefix, planned, index, cancelled_metric, cancelling, attempts, archive_entries)
    if out == 'ready' or out == 'planned' then n = n + 1 end
    if out == 'planned' then
      local due = tonumber(string.sub(member, 1, string.find(member, '|', 1, true) - 1))
      if not earliest or due < earliest then earliest = due end
    end
  end
  if earliest then
    local first = redis.call('ZRANGE', planned, 0, 0, 'WITHSCORES')
    if tonumber(first[2]) >= earliest then redis.call('PUBLISH', doorbell, 'planned') end
  end
  return n
end

-- The stamp (claimed_ms) of a claim record `channel|claimed_ms|envelope`,
-- or 0 when the record is malformed.
local function claim_stamp(rec)
  local s1 = string.find(rec, '|', 1, true)
  local s2 = s1 and string.find(rec, '|', s1 + 1, true)
  return (s2 and tonumber(string.sub(rec, s1 + 1, s2 - 1))) or 0
end

-- Moves claim records back to the head of their original channels (RPUSH:
-- the next jobs popped), the oldest claim nearest the head, and marks each
-- job ready in the index. `entries` is a list of {token, record}, tokens as
-- the hash fields' strings (a token is above 2^50: Lua's own number to
-- string conversion would round it). The caller deletes the claim fields.
-- A record without its channel prefix is archived with a reason. Returns
-- the number requeued and {token, channel, envelope, ...} of the jobs
-- moved; a channel that went from empty to non-empty is recorded (`ring`).
-- `now` (Redis' clock, ms) dates such an archive entry; nil reads TIME
-- only if one is written.
local function requeue_records(entries, prefix, index, archive_entries, now)
  table.sort(entries, function(a, b) return tonumber(a[1]) < tonumber(b[1]) end)
  local n, moved = 0, {}
  -- Newest claim first, so the oldest ends up rightmost: popped first.
  for i = #entries, 1, -1 do
    local token, rec = entries[i][1], entries[i][2]
    local s1 = string.find(rec, '|', 1, true)
    local s2 = s1 and string.find(rec, '|', s1 + 1, true)
    if s2 then
      local channel, env = string.sub(rec, 1, s1 - 1), string.sub(rec, s2 + 1)
      local id = job_id(env)
      -- The claim goes, and its concurrency slot with it (handed on to a
      -- blocked job, which this requeued job then competes with).
      release_slot_of(prefix, index, rec, token)
      if id then redis.call('HSET', index, id, 'ready|' .. channel) end
      if redis.call('RPUSH', prefix .. 'channel:' .. channel, env) == 1 then ring(channel) end
      n = n + 1
      moved[#moved + 1] = token
      moved[#moved + 1] = channel
      moved[#moved + 1] = env
    else
      redis.call('HSET', archive_entries, 'malformed-claim:' .. token,
        cjson.encode({ reason = 'malformed claim record', raw = rec, discarded_ms = now or redis_now_ms() }))
    end
  end
  return n, moved
end


-- >>> priority (decision 41, docs/flow-control.md "Priorities")
-- The channel of a route (`name`, or `name:p` for priority p != 5; channel
-- names cannot contain `:`). For a prioritized route, marks level p in use
-- in the channel's flow string (byte 1 + p; byte 0 is the pause flag), so
-- every claim, which reads that string in the MGET it already makes, visits
-- the level's list: one SETRANGE, idempotent, no read. A plain route costs
-- one pattern match and no command.
local function route_channel(prefix, route)
  local name, level = string.match(route, '^([^:]+):(%d)$')
  if not name then return route end
  redis.call('SETRANGE', prefix .. 'flow:' .. name, 1 + tonumber(level), '1')
  return name
end
-- <<< priority
