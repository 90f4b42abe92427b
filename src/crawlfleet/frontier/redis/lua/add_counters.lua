-- Add counters that belong to no lease to a domain's and the crawl's statistics.
-- KEYS[1] epoch
-- KEYS[2] stats
-- KEYS[3] dstats
-- KEYS[4] admitted
-- ARGV[1] epoch
-- ARGV[2] domain
-- ARGV[3] counters: a JSON object, name -> number

check_epoch()
redis.call('ZADD', K.admitted, 'NX', 0, ARGV[2])  -- listed by domains() from now on
add_counters(ARGV[2], ARGV[3])
write_counters()
return 1
