-- Admit the requests never seen before, within the budget; returns how many were admitted.
-- A request refused by the budget is not marked seen.
-- KEYS[1] seen
-- KEYS[2] bloom
-- KEYS[3] req
-- KEYS[4] ready
-- KEYS[5] parked
-- KEYS[6] next
-- KEYS[7] counts
-- KEYS[8] admitted
-- KEYS[9] seq
-- KEYS[10] order
-- ARGV[1] queue key prefix
-- ARGV[2] Bloom bit positions per request (0: exact dedup)
-- ARGV[3] bits per Bloom shard
-- ARGV[4] max_total admitted (-1: unlimited)
-- ARGV[5] max_per_domain admitted (-1: unlimited)
-- ARGV[6..] per request: fingerprint, domain, priority, request JSON, then its bit positions

local nbits = tonumber(ARGV[2])
local shard_bits = tonumber(ARGV[3])
local max_total = tonumber(ARGV[4])
local max_domain = tonumber(ARGV[5])
local total = tonumber(redis.call('HGET', K.counts, 'admitted') or '0')
local admitted = 0
local i = 6
while i <= #ARGV do
  local fp, domain, priority, json = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2]), ARGV[i + 3]
  local at = i + 4
  i = at + nbits
  if not is_seen(fp, at, nbits, shard_bits) and (max_total < 0 or total < max_total) then
    local in_domain = tonumber(redis.call('HGET', K.admitted, domain) or '0')
    if max_domain < 0 or in_domain < max_domain then
      set_seen(fp, at, nbits, shard_bits)
      redis.call('HINCRBY', K.admitted, domain, 1)
      redis.call('HSET', K.req, fp, json)
      enqueue(domain, fp, priority)
      total = total + 1
      admitted = admitted + 1
    end
  end
end
if admitted > 0 then
  redis.call('HSET', K.counts, 'admitted', total)
  redis.call('HINCRBY', K.counts, 'queued', admitted)
end
return admitted
