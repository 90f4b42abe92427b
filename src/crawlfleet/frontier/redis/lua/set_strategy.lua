-- Replace a domain's fetch strategy slot.
-- KEYS[1] epoch
-- KEYS[2] domain
-- KEYS[3] admitted
-- ARGV[1] epoch
-- ARGV[2] domain
-- ARGV[3] strategy JSON (an object of strings)

check_epoch()
redis.call('ZADD', K.admitted, 'NX', 0, ARGV[2])  -- listed by domains() from now on
redis.call('HSET', domain_key(ARGV[2]), 'strategy', ARGV[3])
return 1
