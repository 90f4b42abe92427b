-- Queue again up to ARGV[3] done requests whose next visit (K.revisit) is at most ARGV[2],
-- earliest first, as K.known holds them (attempt 0, the visit's priority); each leaves
-- K.revisit. A due
-- fingerprint still in K.req (queued, leased or dead) only leaves K.revisit. Returns how
-- many were queued and how many due fingerprints were looked at: {moved, scanned}.
-- KEYS[1] epoch
-- KEYS[2] known
-- KEYS[3] revisit
-- KEYS[4] req
-- KEYS[5] parked
-- KEYS[6] kinds
-- KEYS[7] counts
-- KEYS[8] seq
-- KEYS[9] order
-- KEYS[10] q
-- KEYS[11] ready
-- KEYS[12] domain
-- ARGV[1] epoch
-- ARGV[2] now (epoch s)
-- ARGV[3] limit

check_epoch()
local due = redis.call('ZRANGE', K.revisit, '-inf', ARGV[2], 'BYSCORE', 'LIMIT', 0,
  tonumber(ARGV[3]))
local moved = 0
for _, fp in ipairs(due) do
  redis.call('ZREM', K.revisit, fp)
  local raw = redis.call('HGET', K.known, fp)
  if raw and redis.call('HEXISTS', K.req, fp) == 0 then
    local known = cjson.decode(raw)
    local r = cjson.decode(known.request)
    redis.call('HSET', K.req, fp, known.request)
    redis.call('HINCRBY', domain_key(r.domain), 'queued', 1)
    enqueue(r.fetcher, r.domain, fp, r.priority, 0)
    moved = moved + 1
  end
end
if moved > 0 then
  redis.call('HINCRBY', K.counts, 'done', -moved)
  redis.call('HINCRBY', K.counts, 'queued', moved)
end
return {moved, #due}
