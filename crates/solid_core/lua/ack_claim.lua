-- A node's completions and its next claim in one call (decision 51): while
-- jobs flow, a fetcher refilling its prefetch window carries every
-- completion its workers made since the last claim, so a node makes one
-- script call per claim instead of a claim plus a completion batch.
-- scripts.rs composes this script from ack.lua and claim.lua, unchanged,
-- each as a function of its own KEYS and ARGV: `ack_part` and `claim_part`.
-- Both run in this one atomic call, the completions first, so a slot a
-- completion releases (and the blocked job it moves back) is claimable by
-- the claim that follows; fencing is each part's own, unchanged.
-- KEYS[1..7] ack.lua's KEYS; KEYS[8..] claim.lua's KEYS
-- ARGV[1] how many of ack.lua's arguments follow (n); ARGV[2..1+n] ack.lua's
-- ARGV; ARGV[2+n..] claim.lua's ARGV
-- Returns {stale tokens, claim.lua's reply}, or {stale tokens, the error}
-- when the claim was refused (NODE_EXPIRED): the completions applied
-- either way.
local n = tonumber(ARGV[1])
-- ack.lua's ARGV is two settings, then token and id pairs: none, nothing
-- to complete.
local stale = {}
if n > 2 then stale = ack_part({ unpack(KEYS, 1, 7) }, { unpack(ARGV, 2, 1 + n) }) end
local claimed = claim_part({ unpack(KEYS, 8) }, { unpack(ARGV, 2 + n) })
if claimed.err then return { stale, claimed.err } end
return { stale, claimed }
