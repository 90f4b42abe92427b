-- Extend a current lease to a later expiry (never earlier); 1 if the lease is current, else 0.
-- KEYS[1] epoch
-- KEYS[2] leases
-- ARGV[1] epoch
-- ARGV[2] lease token
-- ARGV[3] expires_at (epoch s)

check_epoch()
local current = redis.call('ZSCORE', K.leases, ARGV[2])
if not current then
  return 0
end
if tonumber(ARGV[3]) > tonumber(current) then
  redis.call('ZADD', K.leases, 'XX', ARGV[3], ARGV[2])
end
return 1
