-- Admit the requests never seen before, within the budget. Returns {admitted, then the place
-- (1 = first) of each request the budget refused}: every other request is now seen, admitted
-- or before. A request refused by the budget is not marked seen; it is counted in its
-- domain's statistics as dropped.max_pages or dropped.max_pages_per_domain (the names of
-- frontier/accounting.py). Each joins its (kind, domain) lane.
-- KEYS[1] epoch
-- KEYS[2] seen
-- KEYS[3] bloom
-- KEYS[4] req
-- KEYS[5] parked
-- KEYS[6] kinds
-- KEYS[7] counts
-- KEYS[8] admitted
-- KEYS[9] seq
-- KEYS[10] order
-- KEYS[11] q
-- KEYS[12] ready
-- KEYS[13] domain
-- KEYS[14] stats
-- KEYS[15] dstats
-- ARGV[1] epoch
-- ARGV[2] Bloom bit positions per request (0: exact dedup)
-- ARGV[3] bits per Bloom shard
-- ARGV[4] max_total admitted (-1: unlimited)
-- ARGV[5] max_per_domain admitted (-1: unlimited)
-- ARGV[6..] per request: fingerprint, domain, fetcher kind, priority, request JSON, then its
--   bit positions

check_epoch()
local nbits = tonumber(ARGV[2])
local shard_bits = tonumber(ARGV[3])
local max_total = tonumber(ARGV[4])
local max_domain = tonumber(ARGV[5])
local total = tonumber(redis.call('HGET', K.counts, 'admitted') or '0')
local admitted = 0
local refused = {}
local place = 0
local i = 6
while i <= #ARGV do
  place = place + 1
  local fp, domain, kind = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local priority, json = tonumber(ARGV[i + 3]), ARGV[i + 4]
  local at = i + 5
  i = at + nbits
  if not is_seen(fp, at, nbits, shard_bits) then
    local fits = max_total < 0 or total < max_total
    local over = 'dropped.max_pages'
    if fits and max_domain >= 0 then
      fits = -tonumber(redis.call('ZSCORE', K.admitted, domain) or '0') < max_domain
      over = 'dropped.max_pages_per_domain'
    end
    if not fits then
      table.insert(refused, place)
      redis.call('ZADD', K.admitted, 'NX', 0, domain)  -- listed by domains() with its counters
      add_counters(domain, cjson.encode({[over] = 1}))
    else
      set_seen(fp, at, nbits, shard_bits)
      redis.call('ZINCRBY', K.admitted, -1, domain)
      redis.call('HSET', K.req, fp, json)
      redis.call('HINCRBY', domain_key(domain), 'queued', 1)
      enqueue(kind, domain, fp, priority, 0, true)
      total = total + 1
      admitted = admitted + 1
    end
  end
end
if admitted > 0 then
  redis.call('HSET', K.counts, 'admitted', total)
  count('queued', admitted)
end
write_counts()
write_counters()
return {admitted, unpack(refused)}
