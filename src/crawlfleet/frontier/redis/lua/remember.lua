-- Keep what is known of a fetched URL and when it is due again (never: not in revisit).
-- KEYS[1] epoch
-- KEYS[2] known
-- KEYS[3] revisit
-- ARGV[1] epoch
-- ARGV[2] fingerprint
-- ARGV[3] JSON {"request": request JSON, "visit": visit}
-- ARGV[4] next visit (epoch s; "inf": never)

check_epoch()
local fp = ARGV[2]
redis.call('HSET', K.known, fp, ARGV[3])
if ARGV[4] == 'inf' then
  redis.call('ZREM', K.revisit, fp)
else
  redis.call('ZADD', K.revisit, ARGV[4], fp)
end
return 1
