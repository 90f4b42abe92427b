-- Forget dead letters (they stay seen); returns how many were forgotten.
-- KEYS[1] req
-- KEYS[2] dead
-- KEYS[3] errors
-- KEYS[4] counts
-- KEYS[5] order
-- ARGV[1] queue key prefix (unused)
-- ARGV[2..] fingerprints

local purged = 0
for i = 2, #ARGV do
  if redis.call('ZREM', K.dead, ARGV[i]) == 1 then
    redis.call('HDEL', K.req, ARGV[i])
    redis.call('HDEL', K.errors, ARGV[i])
    redis.call('HDEL', K.order, ARGV[i])
    purged = purged + 1
  end
end
if purged > 0 then
  redis.call('HINCRBY', K.counts, 'dead', -purged)
end
return purged
