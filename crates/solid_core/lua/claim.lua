-- Claim up to ARGV[1] ready jobs for one node, visiting channels in the
-- order given, and record each claim under a fresh fencing token.
-- KEYS[1] node claims hash, KEYS[2] fence counter, KEYS[3] node heartbeat key,
-- KEYS[4..] channel lists in visiting order
-- ARGV[1] max jobs, ARGV[2] now ms, ARGV[3..] channel names matching KEYS[4..]
-- Returns a flat array: token, channel, envelope, token, channel, envelope...
if redis.call('EXISTS', KEYS[3]) == 0 then
  -- Recovery may already have declared this node dead; a claim recorded now
  -- would never be recovered. The node re-registers with a heartbeat first.
  return redis.error_reply('NODE_EXPIRED node heartbeat missing')
end
local want = tonumber(ARGV[1])
local out = {}
for i = 4, #KEYS do
  if want <= 0 then break end
  local envs = redis.call('RPOP', KEYS[i], want)
  if envs then
    local name = ARGV[i - 1]
    local last = redis.call('INCRBY', KEYS[2], #envs)
    local fields = {}
    for j = 1, #envs do
      local token = last - #envs + j
      fields[#fields + 1] = token
      fields[#fields + 1] = name .. '|' .. ARGV[2] .. '|' .. envs[j]
      out[#out + 1] = token
      out[#out + 1] = name
      out[#out + 1] = envs[j]
    end
    redis.call('HSET', KEYS[1], unpack(fields))
    want = want - #envs
  end
end
return out
