-- Hand a leased request to another fetcher kind's lane, due at once: no attempt, no counter,
-- no error, its retry count kept (the domain's strategy names another fetcher).
-- Returns 1, or 0 when the lease is not current (nothing changes).
-- KEYS[1] epoch
-- KEYS[2] req
-- KEYS[3] parked
-- KEYS[4] kinds
-- KEYS[5] leases
-- KEYS[6] lease
-- KEYS[7] counts
-- KEYS[8] order
-- KEYS[9] seq
-- KEYS[10] q
-- KEYS[11] ready
-- KEYS[12] domain
-- ARGV[1] epoch
-- ARGV[2] lease token
-- ARGV[3] the request JSON to store (its new fetcher kind)

check_epoch()
local fp = end_lease(ARGV[2])
if not fp then
  return 0
end
local r = cjson.decode(ARGV[3])
redis.call('HSET', K.req, fp, ARGV[3])
enqueue(r.fetcher, r.domain, fp, r.priority, 0)
redis.call('HINCRBY', domain_key(r.domain), 'queued', 1)
count('queued', 1)
release_slot(r.domain)
write_counts()
delete_ended()
return 1
