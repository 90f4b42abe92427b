-- Set a domain's base delay and its source; a robots value never replaces an override. The
-- source config puts the domain back on the crawl-wide delay (its delay field removed, so the
-- default the callers pass applies). A parked domain is reconsidered when the delay was set.
-- KEYS[1] epoch
-- KEYS[2] parked
-- KEYS[3] kinds
-- KEYS[4] q
-- KEYS[5] ready
-- KEYS[6] domain
-- KEYS[7] admitted
-- ARGV[1] epoch
-- ARGV[2] domain
-- ARGV[3] delay_s
-- ARGV[4] source: config | robots | robots-capped | override

check_epoch()
redis.call('ZADD', K.admitted, 'NX', 0, ARGV[2])  -- listed by domains() from now on
local key = domain_key(ARGV[2])
local from_robots = ARGV[4] == 'robots' or ARGV[4] == 'robots-capped'
if from_robots and redis.call('HGET', key, 'source') == 'override' then
  return 0
end
if ARGV[4] == 'config' then
  redis.call('HDEL', key, 'delay')
  redis.call('HSET', key, 'source', 'config')
else
  redis.call('HSET', key, 'delay', ARGV[3], 'source', ARGV[4])
end
unpark(ARGV[2])
return 1
