-- Serve nothing from a domain before `until`; never shortens an earlier ready_at.
-- KEYS[1] ready
-- KEYS[2] parked
-- KEYS[3] next
-- ARGV[1] queue key prefix (unused)
-- ARGV[2] domain
-- ARGV[3] until (epoch s)

local domain, block_until = ARGV[2], tonumber(ARGV[3])
if block_until > ready_at(domain) then
  redis.call('HSET', K.next, domain, fmt(block_until))
  redis.call('ZADD', K.ready, 'XX', block_until, domain)
  redis.call('ZADD', K.parked, 'XX', block_until, domain)
end
return 1
