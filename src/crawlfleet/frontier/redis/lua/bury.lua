-- Move a leased request to the dead-letter queue; returns 1, or 0 when the lease is not current.
-- KEYS[1] req
-- KEYS[2] ready
-- KEYS[3] parked
-- KEYS[4] inflight
-- KEYS[5] leases
-- KEYS[6] lease
-- KEYS[7] dead
-- KEYS[8] errors
-- KEYS[9] counts
-- ARGV[1] queue key prefix
-- ARGV[2] lease token
-- ARGV[3] error
-- ARGV[4] now (epoch s): the time of death

local fp = end_lease(ARGV[2])
if not fp then
  return 0
end
local r = stored_request(fp)
append_error(fp, ARGV[3])
redis.call('ZADD', K.dead, ARGV[4], fp)
redis.call('HINCRBY', K.counts, 'dead', 1)
release_slot(r.domain)
return 1
