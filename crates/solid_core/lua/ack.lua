-- Complete claims. A token no longer in the node's claim hash is stale (the
-- job was recovered and may be running elsewhere): it changes nothing and is
-- returned to the caller.
--
-- Resendable batches (ARGV[1] = '1', a node's acker): a batch resent
-- because the reply to its first attempt was lost (that attempt applied:
-- its tokens are gone) is recognised as applied, not stale. The acker never
-- completes a claim twice, writes one batch at a time and resends exactly
-- that batch until it is answered, so one marker per node, naming the last
-- batch applied (first token, last token, size) and what it found stale, is
-- enough: the same batch again gets the same answer and changes nothing.
-- One write per call, not per job; memory: one short string per node.
-- Other callers (the adapter API, where acking twice is the caller's
-- mistake) pass '0': a second completion is stale.
--
-- The ids completed are recorded in a list, so an operator asking for a
-- finished job is told "completed" rather than "unknown" (Console.find). It
-- rides on this call, no round trip of its own, and costs the same whatever
-- the batch size: ONE element per batch, "<processed total after it> id1
-- id2 ...", pushed at the head (LPUSH), and the oldest element popped once
-- all its ids are more than ARGV[2] completions old (LINDEX, RPOP). The
-- processed counter numbers completions, so the list holds the newest
-- ARGV[2] completions plus at most ARGV[2] / 16 and one batch (`step`
-- below); when the oldest element is
-- numbered above the counter (the counter was reset), the list restarts
-- with this batch, so it never outgrows its bound. (An LPUSH of every id cost about 5 % of no-op
-- throughput at 200k jobs/s; this is a memcpy per batch.)
-- KEYS[1] node claims hash, KEYS[2] attempts hash, KEYS[3] processed metric,
-- KEYS[4] stale metric, KEYS[5] job index, KEYS[6] the node's last-batch
-- marker, KEYS[7] recently completed ids (LIST, newest first)
-- ARGV[1] '1' resendable, '0' not; ARGV[2] ids kept in KEYS[7] (0: none);
-- ARGV[3..] token1, id1, token2, id2, ...
local resendable = ARGV[1] == '1'
local keep = tonumber(ARGV[2])
local batch = ARGV[3] .. ':' .. ARGV[#ARGV - 1] .. ':' .. ((#ARGV - 2) / 2)
if resendable then
  -- pcall: a marker Redis refuses (out of memory) must not stop the
  -- completions; a resend then reads as stale, as it did before markers.
  local mark = redis.pcall('SET', KEYS[6], batch .. '|', 'PX', 600000, 'GET')
  if type(mark) == 'string' then
    local sep = string.find(mark, '|', 1, true)
    if sep and string.sub(mark, 1, sep - 1) == batch then
      redis.pcall('SET', KEYS[6], mark, 'PX', 600000)
      local stale = {}
      for t in string.gmatch(string.sub(mark, sep + 1), '[^,]+') do stale[#stale + 1] = t end
      return stale
    end
  end
end
local tokens = {}
for i = 3, #ARGV, 2 do tokens[#tokens + 1] = ARGV[i] end
-- One HMGET and one HDEL for the whole batch, instead of one call per token.
local present = redis.call('HMGET', KEYS[1], unpack(tokens))
local stale, done, ids = {}, {}, {}
for i, rec in ipairs(present) do
  if rec then
    done[#done + 1] = tokens[i]
    ids[#ids + 1] = ARGV[2 * i + 2]
  else
    stale[#stale + 1] = tokens[i]
  end
end
if #done > 0 then
  -- Unique jobs (docs/unique.md): the lock ends with the job. The record
  -- is `channel|claimed_ms|envelope` and a unique envelope ends with its
  -- lock (meta.unique); a plain one ends with a digit and `}`, so plain
  -- jobs pay one byte compared, no command. Compare and delete: a lock
  -- that names another job (taken over after `for:` expired) stays.
  local prefix = string.sub(KEYS[5], 1, #KEYS[5] - 4)
  for i, rec in ipairs(present) do
    if rec and string.byte(rec, -2) == 125 then
      local hex = string.match(string.sub(rec, -100), '"unique":{"lock":"(%x+)","while":"[%l_]+"}}}$')
      if hex then
        local lock = prefix .. 'unique:' .. hex
        if redis.call('GET', lock) == ARGV[2 * i + 2] then redis.call('DEL', lock) end
      end
      -- Concurrency limits (decision 39): the claim record goes in this
      -- call, so does its slot, handed on to the key's oldest blocked job.
      -- Only records present here: a stale or resent ack releases nothing.
      release_slot_of(prefix, KEYS[5], rec, tokens[i])
    end
  end
  ring_channels(prefix .. 'doorbell')
  redis.call('HDEL', KEYS[1], unpack(done))
  redis.call('HDEL', KEYS[2], unpack(ids))
  redis.call('HDEL', KEYS[5], unpack(ids))
  local total = redis.call('INCRBY', KEYS[3], #done)
  -- pcall: a record Redis refuses (out of memory) must not undo the
  -- completions; those ids then read as unknown, never as pending.
  -- The bound is looked at (LINDEX) once the counter crosses a multiple of
  -- `step`, not on every call: the list then holds the newest ARGV[2]
  -- completions plus at most `step` and one batch.
  local step = math.max(1, math.floor(keep / 16))
  if keep > 0 then
    local element = total .. ' ' .. table.concat(ids, ' ')
    redis.pcall('LPUSH', KEYS[7], element)
    -- A counter that was reset to 0 (this batch is all it counts) is
    -- looked at at once: elements numbered above it are dropped.
    local crossed = math.floor(total / step) ~= math.floor((total - #done) / step) or total == #done
    -- Ends: the element just pushed is always kept.
    while crossed do
      local oldest = redis.pcall('LINDEX', KEYS[7], -1)
      if type(oldest) ~= 'string' then break end
      local last = tonumber(string.match(oldest, '^(%d+) '))
      if last and last > total then
        -- The counter was reset: every older element is numbered above it.
        -- One DEL, not one RPOP per element inside this script.
        redis.pcall('DEL', KEYS[7])
        redis.pcall('LPUSH', KEYS[7], element)
        break
      end
      if last and last > total - keep then break end
      redis.pcall('RPOP', KEYS[7])
    end
  end
end
if #stale > 0 then
  redis.call('INCRBY', KEYS[4], #stale)
  if resendable then redis.pcall('SET', KEYS[6], batch .. '|' .. table.concat(stale, ','), 'PX', 600000) end
end
return stale
