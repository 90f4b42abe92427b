-- Set a domain's in-flight cap (a per-domain override); a parked domain is freed.
-- KEYS[1] epoch
-- KEYS[2] parked
-- KEYS[3] kinds
-- KEYS[4] q
-- KEYS[5] ready
-- KEYS[6] domain
-- KEYS[7] admitted
-- ARGV[1] epoch
-- ARGV[2] domain
-- ARGV[3] max_in_flight

check_epoch()
redis.call('ZADD', K.admitted, 'NX', 0, ARGV[2])  -- listed by domains() from now on
redis.call('HSET', domain_key(ARGV[2]), 'max', ARGV[3])
unpark(ARGV[2])
return 1
