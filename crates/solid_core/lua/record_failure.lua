-- Count one failure of a claimed job. Returns {failures, first_failure_ms},
-- or -1 when the claim is stale (nothing is written). Idempotent per claim:
-- the failure record names the token that counted it.
-- KEYS[1] node claims hash, KEYS[2] attempts hash, KEYS[3] failed metric,
-- KEYS[4] stale metric
-- ARGV[1] token, ARGV[2] job id, ARGV[3] now ms, ARGV[4] error class, ARGV[5] message
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then
  redis.call('INCR', KEYS[4])
  return -1
end
local now = tonumber(ARGV[3])
local failures, first = 0, now
local rec = redis.call('HGET', KEYS[2], ARGV[2])
if rec then
  local ok, d = pcall(cjson.decode, rec)
  if ok and type(d) == 'table' then
    failures = tonumber(d.failures) or 0
    first = tonumber(d.first_failure_ms) or now
    -- One claim fails at most once: the same token again is this failure
    -- resent after its reply was lost, already counted. (The token is kept
    -- as a string: cjson would round a number this large.)
    if d.token == ARGV[1] then return {failures, first} end
  end
end
failures = failures + 1
redis.call('HSET', KEYS[2], ARGV[2], cjson.encode({
  failures = failures, first_failure_ms = first, last_failure_ms = now,
  error_class = ARGV[4], message = ARGV[5], token = ARGV[1] }))
redis.call('INCR', KEYS[3])
return {failures, first}
