-- Complete claims. A token no longer in the node's claim hash is stale (the
-- job was recovered and may be running elsewhere): it changes nothing and is
-- returned to the caller.
-- KEYS[1] node claims hash, KEYS[2] attempts hash, KEYS[3] processed metric,
-- KEYS[4] stale metric
-- ARGV token1, id1, token2, id2, ...
local stale = {}
local ids = {}
for i = 1, #ARGV, 2 do
  if redis.call('HDEL', KEYS[1], ARGV[i]) == 1 then
    ids[#ids + 1] = ARGV[i + 1]
  else
    stale[#stale + 1] = ARGV[i]
  end
end
if #ids > 0 then
  redis.call('HDEL', KEYS[2], unpack(ids))
  redis.call('INCRBY', KEYS[3], #ids)
end
if #stale > 0 then redis.call('INCRBY', KEYS[4], #stale) end
return stale
