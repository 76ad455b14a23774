-- Claim up to ARGV[1] ready jobs for one node, visiting channels in the
-- order given, and record each claim under a fresh fencing token. Cancelled
-- jobs met on the way are dropped, not claimed; the job index is consulted
-- only while some cancelled job is still waiting, so claims cost nothing
-- extra otherwise.
-- KEYS[1] node claims hash, KEYS[2] fence counter, KEYS[3] node heartbeat key,
-- KEYS[4] job index, KEYS[5] cancelled metric, KEYS[6] cancelled-waiting counter,
-- KEYS[7] attempts hash, KEYS[8..7+n] channel lists in visiting order,
-- KEYS[8+n..7+2n] their `flow:<name>` strings (pause, priority levels)
-- ARGV[1] max jobs, ARGV[2] claim stamp (claimed_ms), ARGV[3..] channel names
-- matching KEYS[8..7+n]
-- Returns a flat array: token, route, envelope, token, route, envelope...
-- (route: the channel name, or `name:p` for a job of priority p != 5)
-- then, when some channel has a `flow:` string or the claim stopped at its
-- blocked budget (concurrency limits), one trailer triple
-- 0, "name=<flow bytes>,...", more (token 0 is never a real token: tokens
-- are >= TIME * 1024): a node learns which of its channels are paused, and
-- with more = '1' that it should claim again at once.
--
-- Tokens never repeat, even after Redis lost writes and the fence counter
-- went back (an AOF missing its last second, a failover to a replica that
-- was behind): each batch starts above both the counter and a floor from
-- Redis's own clock, now_ms * 1024, SolidEngine's rule. Claims hand out
-- fewer than 1024 tokens per millisecond, so every token handed out before
-- a rollback is below the floor of any claim made after it. The clock is
-- Redis's (TIME), not the node's, so a node's skewed clock cannot lower it;
-- a Redis host whose clock steps back (or a replica's clock behind its
-- primary's) defeats it: keep Redis hosts on NTP.
-- The last of `n` fresh tokens, as a number (exact: tokens stay below 2^53
-- until the year 2248). One SET ... GET: the counter is read and raised to
-- the clock floor at once; a counter found at or past the floor needs a
-- second write: another claim took tokens earlier in the same millisecond
-- of Redis' clock (or more than 1024 were taken in one). TIME is read
-- once, when the first job is claimed: a claim that finds nothing costs
-- nothing more.
local floor, now
-- Redis' clock in ms, read at most once per call: the token floor and the
-- rate limits' log (decision 42) share it.
local function clock()
  if not now then now = redis_now_ms() end
  return now
end
local function take_tokens(n)
  if not floor then floor = clock() * 1024 end
  local last = floor + n
  local before = tonumber(redis.call('SET', KEYS[2], string.format('%d', last), 'GET') or '0')
  if before >= floor then
    last = before + n
    redis.call('SET', KEYS[2], string.format('%d', last))
  end
  return last
end
local want = tonumber(ARGV[1])
local prefix = prefix_of(KEYS[4])
-- >>> flow: pausing channels (docs/flow-control.md, "Pausing channels")
-- The node's heartbeat key, the cancelled-waiting counter and every
-- channel's flow string in one MGET: the one command a plain claim always
-- made (EXISTS and GET before), so a pause is seen by the next claim of
-- every node, at no cost for channels never paused (their value is nil).
local n = #ARGV - 2
local read = redis.call('MGET', KEYS[3], KEYS[6], unpack(KEYS, 8 + n, 7 + 2 * n))
if not read[1] then
  -- Recovery may already have declared this node dead; a claim recorded now
  -- would never be recovered. The node re-registers with a heartbeat first.
  return redis.error_reply('NODE_EXPIRED node heartbeat missing')
end
local check = tonumber(read[2] or '0') > 0
local paused, flags = {}, {}
for k = 1, n do
  local flow = read[k + 2]
  if flow then
    paused[7 + k] = string.byte(flow, 1) == 80 -- 'P'
    flags[#flags + 1] = ARGV[k + 2] .. '=' .. flow
  end
end
-- <<< flow
local out = {}
-- >>> flow control: concurrency limits (decision 39, docs/flow-control.md).
-- `held[hex]`: slots of key `hex` held, read once per key per call (SCARD)
-- and counted up as this call admits. `blocked`: jobs set aside this call;
-- at most BLOCKED_BUDGET, then the claim stops and says `more`, so a deep
-- backlog of one saturated key cannot make one call run long, and a short
-- claim without `more` still means every visited list was empty.
local BLOCKED_BUDGET = 1000
local held, blocked, throttled, more = {}, 0, 0, false
-- >>> rate limits (decision 42, docs/flow-control.md "Rate limits"): an
-- exact sliding log. `rate:<hex>` holds the Redis-clock ms of the key's
-- last <= rl admissions, oldest left; a job is admitted iff fewer than rl
-- of them are within the window rw: the log is short of rl entries, or
-- its oldest is at least rw old (then it is dropped for the new one).
-- `rates[hex]`: per call, {len = entries incl. this call's, stored =
-- entries still in Redis, pending = this call's admissions, to RPUSH
-- once at the end, full = refused once (every later job of the key in
-- this call is refused too: the oldest entry does not age within a call)}.
local rates, wakes = {}, nil
local function rate_admits(f)
  local r = rates[f.r]
  if not r then
    local len = redis.call('LLEN', prefix .. 'rate:' .. f.r)
    r = { len = len, stored = len, pending = 0, rl = f.rl, rw = f.rw }
    rates[f.r] = r
  end
  if r.full then return false end
  if r.len < f.rl then
    r.len = r.len + 1
    r.pending = r.pending + 1
    return true
  end
  -- The rl-th newest admission decides, not the oldest: the log holds
  -- more than rl entries when the limit was lowered since (jobs carry the
  -- limit they were enqueued with) or tasks sharing a group give different
  -- limits. It and everything older go when the job is admitted, so the
  -- log is trimmed to the limit in force.
  local k = r.len - f.rl
  if k < r.stored then
    local at = tonumber(redis.call('LINDEX', prefix .. 'rate:' .. f.r, k))
    if at <= clock() - f.rw then
      redis.call('LTRIM', prefix .. 'rate:' .. f.r, k + 1, -1)
      r.stored = r.stored - (k + 1)
      r.len = r.len - k
      r.pending = r.pending + 1
      return true
    end
    r.wake = at + f.rw
  else
    -- Every entry is this call's own: the oldest is `now`.
    r.wake = clock() + f.rw
  end
  r.full = true
  return false
end
-- A job over its rate waits in Redis (`throttled:<hex>`, indexed
-- `throttled|route`: not claimed, no token, no slot), and its key gets one
-- `flow:wake` member at the time its oldest admission leaves the window.
local function throttle(f, route, env)
  redis.call('LPUSH', prefix .. 'throttled:' .. f.r, route .. '|' .. env)
  local id = job_id(env)
  if id then redis.call('HSET', KEYS[4], id, 'throttled|' .. route) end
  blocked = blocked + 1
  throttled = throttled + 1
  wakes = wakes or {}
  wakes[f.r] = rates[f.r].wake
end
-- <<< rate limits
-- Sets aside the jobs of `keep` whose concurrency key is at its limit
-- (`blocked:<hex>`, indexed `blocked|route`: not claimed, no token, never
-- in a prefetch window), then those over their rate (throttle), and
-- returns the jobs to claim, with the key each
-- admitted one takes a slot of (by position). Plain jobs: one byte
-- compared each, `keep` itself returned.
local function admit(keep, route)
  local admitted, keys = keep, nil
  for j, env in ipairs(keep) do
    local f = flow_of(env)
    if f and f.c then
      if admitted == keep then admitted = { unpack(keep, 1, j - 1) } end
      local n = held[f.c] or redis.call('SCARD', prefix .. 'slots:' .. f.c)
      held[f.c] = n
      if n >= f.cl then
        redis.call('LPUSH', prefix .. 'blocked:' .. f.c, route .. '|' .. env)
        local id = job_id(env)
        if id then redis.call('HSET', KEYS[4], id, 'blocked|' .. route) end
        blocked = blocked + 1
      elseif f.r and not rate_admits(f) then
        throttle(f, route, env)
      else
        held[f.c] = n + 1
        admitted[#admitted + 1] = env
        keys = keys or {}
        keys[#admitted] = f.c
      end
    elseif f and f.r then
      if admitted == keep then admitted = { unpack(keep, 1, j - 1) } end
      if rate_admits(f) then
        admitted[#admitted + 1] = env
      else
        throttle(f, route, env)
      end
    elseif admitted ~= keep then
      admitted[#admitted + 1] = env
    end
  end
  return admitted, keys
end
-- <<< flow control
-- >>> priority (decision 41, docs/flow-control.md "Priorities"): the
-- lists of channel `k` in claim order, as {list key, route} pairs: levels
-- 0..4 in use, the base list (level 5), levels 6..9 in use. Bytes 2..11 of
-- the channel's flow string (levels 0..9) are '1' for a level some push
-- wrote to; a channel that never used a priority has no flow string (or
-- one of one byte, the pause flag) and visits its base list alone, as
-- before. No command: the string came with the MGET above.
local function routes_of(k)
  local base, name, flow = KEYS[7 + k], ARGV[k + 2], read[k + 2]
  if not flow or #flow < 2 then return { { base, name } } end
  local visits = {}
  for level = 0, 9 do
    if level == 5 then
      visits[#visits + 1] = { base, name }
    elseif string.byte(flow, level + 2) == 49 then -- '1'
      visits[#visits + 1] = { base .. ':' .. level, name .. ':' .. level }
    end
  end
  return visits
end
-- <<< priority
for i = 8, 7 + n do
  for _, visit in ipairs(paused[i] and {} or routes_of(i - 7)) do
    while want > 0 do
      local asked = want
      local envs = redis.call('RPOP', visit[1], asked)
      if not envs then break end
      -- The route (`name` or `name:p`) is what the claim record, the reply
      -- and any blocked entry carry, so every script that puts the job back
      -- reaches its own level list.
      local name = visit[2]
      local keep = envs
      if check then
        keep = drop_cancelled(envs, KEYS[4], KEYS[5], KEYS[6], KEYS[7])
      end
      local slot_keys
      keep, slot_keys = admit(keep, name)
      if #keep > 0 then
        local last = take_tokens(#keep)
        local fields, slots = {}, nil
        for j, env in ipairs(keep) do
          local token = last - #keep + j
          -- `while: :queued`: the lock ends when the job is claimed, in the
          -- same script, so a claimed job never holds it and a queued one
          -- never lost it.
          local _, mode = unique_lock(env)
          if mode == 'queued' then release_lock(prefix, env, job_id(env)) end
          fields[#fields + 1] = string.format('%d', token)
          fields[#fields + 1] = name .. '|' .. ARGV[2] .. '|' .. env
          out[#out + 1] = token
          out[#out + 1] = name
          out[#out + 1] = env
          if slot_keys and slot_keys[j] then
            slots = slots or {}
            local list = slots[slot_keys[j]] or {}
            list[#list + 1] = string.format('%d', token)
            slots[slot_keys[j]] = list
          end
        end
        redis.call('HSET', KEYS[1], unpack(fields))
        -- The slot is taken with the claim record, in this same call.
        if slots then
          for hex, tokens in pairs(slots) do redis.call('SADD', prefix .. 'slots:' .. hex, unpack(tokens)) end
        end
        want = want - #keep
      end
      if blocked >= BLOCKED_BUDGET then more = true; break end
      -- Fewer than asked for: the list is empty now, so no RPOP to find it
      -- so. Unless cancelled jobs were dropped: dropping one of a limited
      -- key moves the key's next blocked job back to this list.
      if #envs < asked and not check then break end
    end
    if more or want == 0 then break end
  end
  if more then break end
end
-- >>> rate limits: each key's admissions logged at once (one RPUSH per
-- key per call, the window as expiry: an idle key's log vanishes), and
-- each throttled key's wake time recorded (ZADD LT: the earliest stays).
-- A wake earlier than every other rings `throttled`: schedulers re-arm as
-- for a new earliest planned job, and wake throttled keys from then on
-- (until a promotion finds none; older nodes take it for `ready`).
for hex, r in pairs(rates) do
  if r.pending > 0 then
    local log, at = prefix .. 'rate:' .. hex, string.format('%d', clock())
    local entries = {}
    for k = 1, r.pending do entries[k] = at end
    redis.call('RPUSH', log, unpack(entries))
    redis.call('PEXPIRE', log, r.rw)
  end
end
if wakes then
  local wake_key, earliest, changed = prefix .. 'flow:wake', nil, false
  for hex, at in pairs(wakes) do
    if redis.call('ZADD', wake_key, 'LT', 'CH', at, hex) == 1 then
      changed = true
      if not earliest or at < earliest then earliest = at end
    end
  end
  if changed then
    local first = redis.call('ZRANGE', wake_key, 0, 0, 'WITHSCORES')
    if first[2] and tonumber(first[2]) >= earliest then
      redis.call('PUBLISH', prefix .. 'doorbell', 'throttled')
    end
  end
  redis.call('INCRBY', prefix .. 'metric:throttled', throttled)
end
blocked = blocked - throttled
-- <<< rate limits
if blocked > 0 then redis.call('INCRBY', prefix .. 'metric:blocked', blocked) end
ring_channels(prefix .. 'doorbell')
-- >>> flow: the trailer (see the header); absent for plain channels and
-- a claim that did not stop at its blocked budget.
if more or #flags > 0 then
  out[#out + 1] = 0
  out[#out + 1] = table.concat(flags, ',')
  out[#out + 1] = more and '1' or '0'
end
-- <<< flow
return out
