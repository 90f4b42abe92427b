-- Earliest time a queued request of the given kinds may become claimable, as a string; false
-- when none is queued. Parked domains (at their in-flight cap) and their delayed retries are
-- left out: they wait for a lease to end. A delayed retry counts with the later of its
-- not-before and its domain's ready_at. The time may be in the past: the caller compares it
-- with now.
-- KEYS[1] req
-- KEYS[2] parked
-- KEYS[3] delayed
-- KEYS[4] ready
-- KEYS[5] domain
-- ARGV[1] epoch (unused)
-- ARGV[2..] the fetcher kinds

local best = false
local function consider(t)
  if not best or t < best then
    best = t
  end
end
for i = 2, #ARGV do
  local first = redis.call('ZRANGE', ready_index(ARGV[i]), 0, 0, 'WITHSCORES')
  if first[2] then
    consider(tonumber(first[2]))
  end
end
-- Retries in not-before order; stop once not-befores pass the best time so far, or after
-- SCAN_MAX of them (then the next not-before stands in: early, never late).
local SCAN_MAX = 1000
for k = 2, #ARGV do
  local delayed = redis.call('ZRANGE', delayed_index(ARGV[k]), 0, SCAN_MAX, 'WITHSCORES')
  for i = 1, #delayed, 2 do
    local not_before = tonumber(delayed[i + 1])
    if best and not_before >= best then
      break
    end
    if i > 2 * SCAN_MAX then
      consider(not_before)
      break
    end
    local r = stored_request(delayed[i])
    if redis.call('SISMEMBER', K.parked, r.domain) == 0 then
      consider(math.max(not_before, ready_at(r.domain)))
    end
  end
end
return best and fmt(best)
