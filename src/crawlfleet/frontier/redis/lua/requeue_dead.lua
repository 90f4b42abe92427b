-- Move dead letters back to their queues with a fresh history; returns how many moved.
-- Fingerprints no longer dead are skipped.
-- KEYS[1] req
-- KEYS[2] ready
-- KEYS[3] parked
-- KEYS[4] next
-- KEYS[5] dead
-- KEYS[6] errors
-- KEYS[7] counts
-- KEYS[8] seq
-- KEYS[9] order
-- ARGV[1] queue key prefix
-- ARGV[2..] per dead letter: fingerprint, domain, priority, request JSON (attempt reset)

local moved = 0
for i = 2, #ARGV, 4 do
  local fp = ARGV[i]
  if redis.call('ZREM', K.dead, fp) == 1 then
    redis.call('HSET', K.req, fp, ARGV[i + 3])
    redis.call('HDEL', K.errors, fp)
    enqueue(ARGV[i + 1], fp, tonumber(ARGV[i + 2]))
    moved = moved + 1
  end
end
if moved > 0 then
  redis.call('HINCRBY', K.counts, 'dead', -moved)
  redis.call('HINCRBY', K.counts, 'queued', moved)
end
return moved
