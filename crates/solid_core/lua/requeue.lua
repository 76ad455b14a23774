-- Move every claim of one node back to the head of its original channel
-- (RPUSH: the next job popped), in claim order, and deregister the node.
-- mode 'shutdown': the node itself, leaving. mode 'recover': any node, and
-- only while the target's heartbeat key is absent; atomic, so when several
-- nodes recover the same dead node at once exactly one moves its claims.
-- KEYS[1] target claims hash, KEYS[2] target heartbeat key, KEYS[3] nodes set,
-- KEYS[4] doorbell, KEYS[5] archive entries
-- ARGV[1] key prefix, ARGV[2] target node id, ARGV[3] mode, ARGV[4] now ms
-- Returns the number of jobs requeued, or -1 when the node is alive.
if ARGV[3] == 'recover' and redis.call('EXISTS', KEYS[2]) == 1 then return -1 end
local all = redis.call('HGETALL', KEYS[1])
local tokens, records = {}, {}
for i = 1, #all, 2 do
  local t = tonumber(all[i])
  tokens[#tokens + 1] = t
  records[t] = all[i + 1]
end
table.sort(tokens)
local n, rang = 0, false
-- Newest claim first, so the oldest ends up rightmost: popped first.
for i = #tokens, 1, -1 do
  local rec = records[tokens[i]]
  local s1 = string.find(rec, '|', 1, true)
  local s2 = s1 and string.find(rec, '|', s1 + 1, true)
  if s2 then
    if redis.call('RPUSH', ARGV[1] .. 'channel:' .. string.sub(rec, 1, s1 - 1), string.sub(rec, s2 + 1)) == 1 then
      rang = true
    end
    n = n + 1
  else
    redis.call('HSET', KEYS[5], 'malformed-claim:' .. tokens[i],
      cjson.encode({ reason = 'malformed claim record', raw = rec, discarded_ms = tonumber(ARGV[4]) }))
  end
end
redis.call('DEL', KEYS[1], KEYS[2])
redis.call('SREM', KEYS[3], ARGV[2])
if rang then redis.call('PUBLISH', KEYS[4], 'ready') end
return n
