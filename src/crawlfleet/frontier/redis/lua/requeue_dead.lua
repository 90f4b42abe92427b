-- Move dead letters back to their lanes with a fresh history; returns how many moved.
-- Fingerprints no longer dead are skipped.
-- KEYS[1] epoch
-- KEYS[2] req
-- KEYS[3] parked
-- KEYS[4] kinds
-- KEYS[5] dead
-- KEYS[6] errors
-- KEYS[7] counts
-- KEYS[8] seq
-- KEYS[9] order
-- KEYS[10] q
-- KEYS[11] ready
-- KEYS[12] domain
-- ARGV[1] epoch
-- ARGV[2..] per dead letter: fingerprint, domain, fetcher kind, priority, request JSON
--   (attempt reset)

check_epoch()
local moved = 0
for i = 2, #ARGV, 5 do
  local fp, domain = ARGV[i], ARGV[i + 1]
  local member = dead_member(fp)
  if member and redis.call('ZREM', K.dead, member) == 1 then
    redis.call('HSET', K.req, fp, ARGV[i + 4])
    redis.call('HDEL', K.errors, fp)
    redis.call('HINCRBY', domain_key(domain), 'queued', 1)
    enqueue(ARGV[i + 2], domain, fp, tonumber(ARGV[i + 3]), 0)
    moved = moved + 1
  end
end
if moved > 0 then
  redis.call('HINCRBY', K.counts, 'dead', -moved)
  redis.call('HINCRBY', K.counts, 'queued', moved)
end
return moved
