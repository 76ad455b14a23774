-- Move claims of one node back to the head of their original channels
-- (RPUSH: the next jobs popped), oldest claim nearest the head.
-- mode 'shutdown': every claim of the node itself, which is leaving.
-- mode 'recover': every claim of any node, only while its heartbeat key is
--   absent; atomic, so when several nodes recover the same dead node at
--   once exactly one moves its claims.
-- mode 'release': only the claims recorded with claimed_ms == ARGV[4]: a
--   claim whose reply was lost on a broken connection (the node never saw
--   those jobs, so nobody would run them).
-- mode 'tokens': only the claims ARGV[6..] name (a rate limited job the
--   node hands back unstarted, having waited in its prefetch window longer
--   than its start slack: decision 42); counted in metric:handed_back.
-- KEYS[1] target claims hash, KEYS[2] target heartbeat key, KEYS[3] nodes set,
-- KEYS[4] doorbell, KEYS[5] archive entries, KEYS[6] job index
-- ARGV[1] key prefix, ARGV[2] target node id, ARGV[3] mode,
-- ARGV[4] claim stamp (mode 'release'), ARGV[5] '1' to report the jobs moved
-- Returns the number of jobs requeued, or -1 when the node is alive. When
-- reporting: {number requeued, token, channel, envelope, token, ...}, so the
-- recovering node can emit job.recovered for each.
local mode = ARGV[3]
if mode == 'recover' and redis.call('EXISTS', KEYS[2]) == 1 then return -1 end
local all = redis.call('HGETALL', KEYS[1])
local entries = {}
for i = 1, #all, 2 do
  local rec = all[i + 1]
  local keep = true
  if mode == 'tokens' then
    keep = false
    for k = 6, #ARGV do
      if ARGV[k] == all[i] then keep = true end
    end
  elseif mode == 'release' then
    local s1 = string.find(rec, '|', 1, true)
    local s2 = s1 and string.find(rec, '|', s1 + 1, true)
    keep = s2 ~= nil and string.sub(rec, s1 + 1, s2 - 1) == ARGV[4]
  end
  if keep then entries[#entries + 1] = { all[i], rec } end
end
local n, moved = requeue_records(entries, ARGV[1], KEYS[6], KEYS[5], nil)
if mode == 'release' or mode == 'tokens' then
  for _, e in ipairs(entries) do redis.call('HDEL', KEYS[1], e[1]) end
  if mode == 'tokens' and n > 0 then redis.call('INCRBY', ARGV[1] .. 'metric:handed_back', n) end
else
  redis.call('DEL', KEYS[1], KEYS[2])
  redis.call('SREM', KEYS[3], ARGV[2])
  redis.call('ZREM', ARGV[1] .. 'node_deadlines', ARGV[2])
end
ring_channels(KEYS[4])
if ARGV[5] == '1' then
  table.insert(moved, 1, n)
  return moved
end
return n
