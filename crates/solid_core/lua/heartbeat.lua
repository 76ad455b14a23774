-- Refresh a node's heartbeat, and answer what the node needs to know without
-- issuing further commands while idle: whether its channels have work, which
-- nodes are dead, and the control requests in its mailbox. Also releases
-- publication barriers whose publisher did not (it died): see hold.lua.
-- KEYS[1] node key, KEYS[2] nodes set, KEYS[3] control mailbox, KEYS[4] publishing zset,
-- KEYS[5] planned zset, KEYS[6] doorbell, KEYS[7] job index, KEYS[8] cancelled metric,
-- KEYS[9] cancelled-waiting counter, KEYS[10] attempts hash, KEYS[11] archive entries,
-- KEYS[12..] channel lists the node serves
-- ARGV[1] node id, ARGV[2] ttl ms, ARGV[3] description JSON, ARGV[4] key prefix,
-- ARGV[5] control requests to take (0: leave the mailbox alone),
-- ARGV[6] claim floor (0: do not reconcile the node's claims), ARGV[7] check
-- stamp (increasing per node), ARGV[8..] the tokens the node holds
-- Returns {1 if any served channel has ready jobs else 0, barriers released,
-- keyspace incarnation, fence counter, check stamp of the holding record
-- this call replaced (0: none), number of claims handed back u, u job
-- ids..., number of control requests k, k requests..., dead node ids...}
--
-- The node's own claims hash, holding record, the node deadlines zset, and
-- the namespace's fence and incarnation keys are named from the prefix (as the other nodes' heartbeat
-- keys are below), so the channel lists stay KEYS[12..].
redis.call('SET', KEYS[1], ARGV[3], 'PX', ARGV[2])
redis.call('SADD', KEYS[2], ARGV[1])
local now = redis_now_ms()
local prefix = ARGV[4]
-- When the node key expires, on Redis' clock: the dead are found by their
-- deadlines (below), so a beat costs the same whatever the number of nodes.
local deadlines = prefix .. 'node_deadlines'
redis.call('ZADD', deadlines, now + tonumber(ARGV[2]), ARGV[1])
local expired = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', now, 'LIMIT', 0, 500)
local released = 0
if #expired > 0 then
  redis.call('ZREM', KEYS[4], unpack(expired))
  released = release_all(expired, now, prefix, KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9], KEYS[10], KEYS[11])
end

-- Reconciliation: claims recorded under this node that it does not hold go
-- back to the head of their channels now, not at shutdown. A claim whose
-- reply was lost can still arrive late (its bytes were in flight on a
-- connection the node gave up), and a Redis that lost writes (an older
-- AOF/RDB, a lagging replica) brings back claims the node already settled.
-- The node sends every token it holds (claimed and not yet settled in
-- Redis) and the floor: the stamp of its oldest claim call whose reply it
-- has not seen yet, or of its next one. A claim stamped at or above it may
-- be one the node is about to receive, so it is left alone.
local handed_back = {}
local previous_check = 0
local floor = tonumber(ARGV[6]) or 0
if floor > 0 then
  local claims = prefix .. 'claims:' .. ARGV[1]
  local held = {}
  for i = 8, #ARGV do held[ARGV[i]] = true end
  local unknown = {}
  for _, token in ipairs(redis.call('HKEYS', claims)) do
    if not held[token] then unknown[#unknown + 1] = token end
  end
  local entries = {}
  for from = 1, #unknown, 1000 do
    local to = math.min(from + 999, #unknown)
    local recs = redis.call('HMGET', claims, unpack(unknown, from, to))
    for j, rec in ipairs(recs) do
      if rec and claim_stamp(rec) < floor then entries[#entries + 1] = { unknown[from + j - 1], rec } end
    end
  end
  if #entries > 0 then
    local _, moved = requeue_records(entries, prefix, KEYS[7], KEYS[11], now)
    for _, e in ipairs(entries) do redis.call('HDEL', claims, e[1]) end
    for i = 3, #moved, 3 do
      handed_back[#handed_back + 1] = job_id(moved[i]) or ('token ' .. moved[i - 2])
    end
  end
  -- What the node held at this heartbeat, for IntegrityCheck: a claim
  -- stamped below `floor` that is not in this list is one the node does
  -- not hold. `floor|check|token,token,...`, living as long as the node
  -- key. The record it replaces tells the node whether Redis lost writes:
  -- an older check than the last one Redis acknowledged means it went back.
  local previous = redis.pcall('SET', prefix .. 'holding:' .. ARGV[1],
    ARGV[6] .. '|' .. ARGV[7] .. '|' .. table.concat(ARGV, ',', 8), 'PX', ARGV[2], 'GET')
  -- (Its second field, read as a claim record's stamp is.)
  if type(previous) == 'string' then
    previous_check = claim_stamp(previous)
    -- Two heartbeats of one node can cross (the fetcher re-registering
    -- while the heartbeat thread beats): the newer record stays.
    if previous_check > tonumber(ARGV[7]) then redis.pcall('SET', prefix .. 'holding:' .. ARGV[1], previous, 'PX', ARGV[2]) end
  end
end

-- The namespace's incarnation: created by the first heartbeat that finds
-- it missing. A node that sees it change knows Redis lost the namespace
-- (restarted without persistence, flushed) and says so.
local incarnation = redis.call('GET', prefix .. 'incarnation')
if not incarnation then
  local time = redis.call('TIME')
  incarnation = time[1] .. string.format('%06d', tonumber(time[2]))
  redis.call('SET', prefix .. 'incarnation', incarnation)
end
local fence = redis.call('GET', prefix .. 'fence') or '0'

-- The channels the released barriers and the handed back claims made
-- non-empty, each rung once.
ring_channels(KEYS[6])

local ready = 0
for i = 12, #KEYS do
  if redis.call('LLEN', KEYS[i]) > 0 then ready = 1; break end
end
local requests = {}
local take = tonumber(ARGV[5])
if take > 0 then requests = redis.call('LPOP', KEYS[3], take) or {} end
local out = { ready, released, incarnation, fence, previous_check, #handed_back }
for _, id in ipairs(handed_back) do out[#out + 1] = id end
out[#out + 1] = #requests
for _, r in ipairs(requests) do out[#out + 1] = r end
-- Dead nodes: those whose deadline passed and whose key is gone (the key
-- is the truth; a deadline only says where to look), at most DEAD_PER_BEAT
-- per beat: recovery removes each one's deadline, so later beats find the
-- next ones. With more overdue than that, the window starts at an offset
-- taken from the clock, so nodes whose recovery keeps failing cannot hold
-- it for good. Two registered nodes sampled per beat catch a node that has
-- no deadline (registered by a version before them, or whose ZADD a Redis
-- lost): found in O(nodes) beats of the cluster, not O(1) per beat.
local DEAD_PER_BEAT = 16
local dead = {}
local overdue = redis.call('ZCOUNT', deadlines, '-inf', now)
if overdue > 0 then
  local offset = 0
  if overdue > DEAD_PER_BEAT then offset = now % (overdue - DEAD_PER_BEAT + 1) end
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', deadlines, '-inf', now, 'LIMIT', offset, DEAD_PER_BEAT)) do
    if redis.call('EXISTS', prefix .. 'node:' .. id) == 0 then
      dead[id] = true
      out[#out + 1] = id
    end
  end
end
for _, id in ipairs(redis.call('SRANDMEMBER', KEYS[2], 2)) do
  if not dead[id] and not redis.call('ZSCORE', deadlines, id) and redis.call('EXISTS', prefix .. 'node:' .. id) == 0 then
    out[#out + 1] = id
  end
end
return out
