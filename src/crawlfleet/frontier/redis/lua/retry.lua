-- Put a leased request back, not due before a time, with its error recorded; returns 1, or 0
-- when the lease is not current.
-- KEYS[1] req
-- KEYS[2] delayed
-- KEYS[3] ready
-- KEYS[4] parked
-- KEYS[5] inflight
-- KEYS[6] leases
-- KEYS[7] lease
-- KEYS[8] errors
-- KEYS[9] counts
-- ARGV[1] queue key prefix
-- ARGV[2] lease token
-- ARGV[3] not_before (epoch s)
-- ARGV[4] error
-- ARGV[5] the request JSON to store (attempt already incremented)

local fp = end_lease(ARGV[2])
if not fp then
  return 0
end
local r = stored_request(fp)
redis.call('HSET', K.req, fp, ARGV[5])
append_error(fp, ARGV[4])
redis.call('ZADD', K.delayed, ARGV[3], fp)
redis.call('HINCRBY', K.counts, 'queued', 1)
release_slot(r.domain)
return 1
