-- Mark a leased request done; returns 1, or 0 when the lease is not current.
-- KEYS[1] req
-- KEYS[2] ready
-- KEYS[3] parked
-- KEYS[4] inflight
-- KEYS[5] leases
-- KEYS[6] lease
-- KEYS[7] errors
-- KEYS[8] counts
-- KEYS[9] order
-- ARGV[1] queue key prefix
-- ARGV[2] lease token

local fp = end_lease(ARGV[2])
if not fp then
  return 0
end
local r = stored_request(fp)
redis.call('HDEL', K.req, fp)
redis.call('HDEL', K.errors, fp)
redis.call('HDEL', K.order, fp)
redis.call('HINCRBY', K.counts, 'done', 1)
release_slot(r.domain)
return 1
