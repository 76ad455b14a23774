-- Where a live job is. Read-only.
-- KEYS[1] job index, KEYS[2] nodes set
-- ARGV[1] job id, ARGV[2] key prefix
-- Returns nil, or {state, channel, node holding its claim or '', claim token or ''}.
local state = redis.call('HGET', KEYS[1], ARGV[1])
if not state then return nil end
local sep = string.find(state, '|', 1, true)
local kind, channel = string.sub(state, 1, sep - 1), string.sub(state, sep + 1)
if kind == 'cancelled' then
  local inner = string.find(channel, '|', 1, true)
  return { kind, inner and string.sub(channel, inner + 1) or channel, '', '' }
end
local node, token = claimed_by(KEYS[2], ARGV[2], ARGV[1])
if node then return { 'claimed', channel, node, token } end
return { kind, channel, '', '' }
