-- Forget dead letters (they stay seen); returns how many were forgotten.
-- KEYS[1] epoch
-- KEYS[2] req
-- KEYS[3] dead
-- KEYS[4] errors
-- KEYS[5] counts
-- KEYS[6] order
-- ARGV[1] epoch
-- ARGV[2..] fingerprints

check_epoch()
local purged = 0
for i = 2, #ARGV do
  local member = dead_member(ARGV[i])
  if member and redis.call('ZREM', K.dead, member) == 1 then
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
