-- Count leases that expired before now as failed attempts, at most `most` of them; returns
-- how many (the caller calls again while that equals `most`). Each request gets `error` in
-- its history; with attempt >= max_retries it dies (died_at = its lease's expiry), else it
-- goes back to its queue with attempt + 1.
-- KEYS[1] req
-- KEYS[2] ready
-- KEYS[3] parked
-- KEYS[4] next
-- KEYS[5] inflight
-- KEYS[6] leases
-- KEYS[7] lease
-- KEYS[8] dead
-- KEYS[9] errors
-- KEYS[10] counts
-- KEYS[11] seq
-- KEYS[12] order
-- ARGV[1] queue key prefix
-- ARGV[2] now (epoch s)
-- ARGV[3] most
-- ARGV[4] max_retries
-- ARGV[5] error

local max_retries = tonumber(ARGV[4])
local expired = redis.call('ZRANGEBYSCORE', K.leases, '-inf', '(' .. ARGV[2],
  'WITHSCORES', 'LIMIT', 0, ARGV[3])
local requeued, buried = 0, 0
for i = 1, #expired, 2 do
  local fp = end_lease(expired[i])
  local r = stored_request(fp)
  release_slot(r.domain)
  append_error(fp, ARGV[5])
  if r.attempt >= max_retries then
    redis.call('ZADD', K.dead, expired[i + 1], fp)
    buried = buried + 1
  else
    r.attempt = r.attempt + 1
    redis.call('HSET', K.req, fp, cjson.encode(r))
    enqueue(r.domain, fp, r.priority)
    requeued = requeued + 1
  end
end
if requeued > 0 then
  redis.call('HINCRBY', K.counts, 'queued', requeued)
end
if buried > 0 then
  redis.call('HINCRBY', K.counts, 'dead', buried)
end
return requeued + buried
