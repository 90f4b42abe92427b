-- Return every request whose lease expired before now to its queue; returns how many.
-- KEYS[1] req
-- KEYS[2] ready
-- KEYS[3] parked
-- KEYS[4] next
-- KEYS[5] inflight
-- KEYS[6] leases
-- KEYS[7] lease
-- KEYS[8] counts
-- KEYS[9] seq
-- ARGV[1] queue key prefix
-- ARGV[2] now (epoch s)

local expired = redis.call('ZRANGEBYSCORE', K.leases, '-inf', '(' .. ARGV[2])
for _, token in ipairs(expired) do
  local fp = end_lease(token)
  local r = stored_request(fp)
  release_slot(r.domain)
  enqueue(r.domain, fp, r.priority)
end
redis.call('HINCRBY', K.counts, 'queued', #expired)
return #expired
