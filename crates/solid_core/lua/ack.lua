-- Complete claims. A token no longer in the node's claim hash is stale (the
-- job was recovered and may be running elsewhere): it changes nothing and is
-- returned to the caller.
-- KEYS[1] node claims hash, KEYS[2] attempts hash, KEYS[3] processed metric,
-- KEYS[4] stale metric, KEYS[5] job index
-- ARGV token1, id1, token2, id2, ...
local tokens = {}
for i = 1, #ARGV, 2 do tokens[#tokens + 1] = ARGV[i] end
-- One HMGET and one HDEL for the whole batch, instead of one call per token.
local present = redis.call('HMGET', KEYS[1], unpack(tokens))
local stale, done, ids = {}, {}, {}
for i, rec in ipairs(present) do
  if rec then
    done[#done + 1] = tokens[i]
    ids[#ids + 1] = ARGV[2 * i]
  else
    stale[#stale + 1] = tokens[i]
  end
end
if #done > 0 then
  redis.call('HDEL', KEYS[1], unpack(done))
  redis.call('HDEL', KEYS[2], unpack(ids))
  redis.call('HDEL', KEYS[5], unpack(ids))
  redis.call('INCRBY', KEYS[3], #done)
end
if #stale > 0 then redis.call('INCRBY', KEYS[4], #stale) end
return stale
