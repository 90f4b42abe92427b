-- Override one domain's delay and in-flight limit; a parked domain is reconsidered.
-- KEYS[1] ready
-- KEYS[2] parked
-- KEYS[3] policy
-- ARGV[1] queue key prefix
-- ARGV[2] domain
-- ARGV[3] delay_s
-- ARGV[4] max_in_flight

redis.call('HSET', K.policy, ARGV[2], ARGV[3] .. ' ' .. ARGV[4])
unpark(ARGV[2])
return 1
