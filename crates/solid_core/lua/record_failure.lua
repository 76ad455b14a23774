-- Count one failure of a claimed job. Returns {failures, first_failure_ms,
-- now ms}, both times on Redis' clock (so the caller measures how long the
-- job has been failing without comparing two nodes' clocks), or -1 when the
-- claim is stale (nothing is written). Idempotent per claim: the failure
-- record names the token that counted it.
-- With ARGV[5] = '1' the task is unknown to the worker that claimed it (a
-- rolling deploy, a worker without --require): that is not a failure of
-- the task, so it is counted apart (`unknown`, `first_unknown_ms`) and
-- `failures` and `first_failure_ms` stay as they were; max_failures and
-- retry_within still see only the task's own failures once it runs.
-- Returns {unknown, first_unknown_ms, now ms} then.
-- KEYS[1] node claims hash, KEYS[2] attempts hash, KEYS[3] failed metric,
-- KEYS[4] stale metric
-- ARGV[1] token, ARGV[2] job id, ARGV[3] error class, ARGV[4] message,
-- ARGV[5] '1' for an unknown task, else '0' (or absent)
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then
  redis.call('INCR', KEYS[4])
  return -1
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local d = {}
local rec = redis.call('HGET', KEYS[2], ARGV[2])
if rec then
  local ok, decoded = pcall(cjson.decode, rec)
  if ok and type(decoded) == 'table' then
    d = decoded
    -- One claim fails at most once: the same token again is this failure
    -- resent after its reply was lost, already counted. (The token is kept
    -- as a string: cjson would round a number this large.)
    if ARGV[5] ~= '1' and d.token == ARGV[1] then
      return {tonumber(d.failures) or 0, tonumber(d.first_failure_ms) or now, now}
    end
    if ARGV[5] == '1' and d.unknown_token == ARGV[1] then
      return {tonumber(d.unknown) or 0, tonumber(d.first_unknown_ms) or now, now}
    end
  end
end
if ARGV[5] == '1' then
  local unknown = (tonumber(d.unknown) or 0) + 1
  local first_unknown = tonumber(d.first_unknown_ms) or now
  d.unknown, d.first_unknown_ms, d.last_failure_ms = unknown, first_unknown, now
  d.error_class, d.message, d.unknown_token = ARGV[3], ARGV[4], ARGV[1]
  redis.call('HSET', KEYS[2], ARGV[2], cjson.encode(d))
  redis.call('INCR', KEYS[3])
  return {unknown, first_unknown, now}
end
local failures = (tonumber(d.failures) or 0) + 1
local first = tonumber(d.first_failure_ms) or now
-- A new record: the task ran, so the unknown-task count no longer applies.
redis.call('HSET', KEYS[2], ARGV[2], cjson.encode({
  failures = failures, first_failure_ms = first, last_failure_ms = now,
  error_class = ARGV[3], message = ARGV[4], token = ARGV[1] }))
redis.call('INCR', KEYS[3])
return {failures, first, now}
