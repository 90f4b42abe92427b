-- Earliest time a queued request may become claimable, as a string; false when none is queued.
-- Parked domains count with their ready_at (they wait for a lease to end, too); a delayed
-- retry counts with the later of its not-before and its domain's ready_at.
-- KEYS[1] req
-- KEYS[2] delayed
-- KEYS[3] ready
-- KEYS[4] parked
-- KEYS[5] next
-- ARGV[1] queue key prefix (unused)

local best = false
local function consider(t)
  if not best or t < best then
    best = t
  end
end
for _, key in ipairs({K.ready, K.parked}) do
  local first = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  if first[2] then
    consider(tonumber(first[2]))
  end
end
local retry = redis.call('ZRANGE', K.delayed, 0, 0, 'WITHSCORES')
if retry[1] then
  local r = stored_request(retry[1])
  consider(math.max(tonumber(retry[2]), ready_at(r.domain)))
end
return best and fmt(best)
