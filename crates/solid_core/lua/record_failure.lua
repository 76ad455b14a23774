-- Count one failure of a claimed job. Returns {failures, first_failure_ms,
-- now ms}, both times on Redis' clock (so the caller measures how long the
-- job has been failing without comparing two nodes' clocks), or -1 when the
-- claim is stale (nothing is written).
-- KEYS[1] node claims hash, KEYS[2] attempts hash, KEYS[3] failed metric,
-- KEYS[4] stale metric
-- ARGV[1] token, ARGV[2] job id, ARGV[3] error class, ARGV[4] message
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then
  redis.call('INCR', KEYS[4])
  return -1
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local failures, first = 0, now
local rec = redis.call('HGET', KEYS[2], ARGV[2])
if rec then
  local ok, d = pcall(cjson.decode, rec)
  if ok and type(d) == 'table' then
    failures = tonumber(d.failures) or 0
    first = tonumber(d.first_failure_ms) or now
  end
end
failures = failures + 1
redis.call('HSET', KEYS[2], ARGV[2], cjson.encode({
  failures = failures, first_failure_ms = first, last_failure_ms = now,
  error_class = ARGV[3], message = ARGV[4] }))
redis.call('INCR', KEYS[3])
return {failures, first, now}
