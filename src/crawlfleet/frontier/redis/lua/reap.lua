-- Return requests whose lease expired before now to their queues, at most `most` of them;
-- returns how many (the caller calls again while that equals `most`).
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
-- ARGV[3] most

local expired = redis.call('ZRANGEBYSCORE', K.leases, '-inf', '(' .. ARGV[2], 'LIMIT', 0, ARGV[3])
for _, token in ipairs(expired) do
  local fp = end_lease(token)
  local r = stored_request(fp)
  release_slot(r.domain)
  enqueue(r.domain, fp, r.priority)
end
redis.call('HINCRBY', K.counts, 'queued', #expired)
return #expired
