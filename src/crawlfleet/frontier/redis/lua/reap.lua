-- Count leases that expired before now as failed attempts, at most `most` of them; returns
-- how many (the caller calls again while that equals `most`). Each request gets `error` in
-- its history, an attempt row (worker "?", no status, at = its lease's expiry) and its
-- counters; with attempt >= max_retries it dies (died_at = its lease's expiry), else it goes
-- back to its lane with attempt + 1. The domain does not rest and its block window stays.
-- KEYS[1] epoch
-- KEYS[2] req
-- KEYS[3] parked
-- KEYS[4] kinds
-- KEYS[5] leases
-- KEYS[6] lease
-- KEYS[7] dead
-- KEYS[8] errors
-- KEYS[9] counts
-- KEYS[10] seq
-- KEYS[11] order
-- KEYS[12] stats
-- KEYS[13] attempts
-- KEYS[14] q
-- KEYS[15] ready
-- KEYS[16] domain
-- KEYS[17] dstats
-- ARGV[1] epoch
-- ARGV[2] now (epoch s)
-- ARGV[3] most
-- ARGV[4] max_retries
-- ARGV[5] error
-- ARGV[6] the counters of a requeued request: a JSON object, name -> number
-- ARGV[7] the counters of one that dies

check_epoch()
local max_retries = tonumber(ARGV[4])
local err = ARGV[5]
local expired = redis.call('ZRANGEBYSCORE', K.leases, '-inf', '(' .. ARGV[2],
  'WITHSCORES', 'LIMIT', 0, ARGV[3])

local function attempt_json(r, outcome, at)
  return '{"url":' .. cjson.encode(r.url) .. ',"fingerprint":' .. cjson.encode(r.fingerprint)
    .. ',"domain":' .. cjson.encode(r.domain) .. ',"worker":"?","outcome":"' .. outcome
    .. '","status":null,"bytes":0,"latency_s":0.0,"retry":' .. string.format('%d', r.attempt)
    .. ',"at":' .. jfloat(at) .. ',"error":' .. cjson.encode(err) .. ',"fetcher":'
    .. cjson.encode(r.fetcher) .. ',"detail":null}'
end

local requeued, buried = 0, 0
for i = 1, #expired, 2 do
  local fp = end_lease(expired[i])
  local r = stored_request(fp)
  local at = tonumber(expired[i + 1])
  release_slot(r.domain)
  append_error(fp, err)
  if r.attempt >= max_retries then
    redis.call('RPUSH', K.attempts, attempt_json(r, 'dead', at))
    add_counters(r.domain, ARGV[7])
    redis.call('ZADD', K.dead, expired[i + 1], dead_member(fp))
    buried = buried + 1
  else
    redis.call('RPUSH', K.attempts, attempt_json(r, 'retry', at))
    add_counters(r.domain, ARGV[6])
    r.attempt = r.attempt + 1
    redis.call('HSET', K.req, fp, cjson.encode(r))
    redis.call('HINCRBY', domain_key(r.domain), 'queued', 1)
    enqueue(r.fetcher, r.domain, fp, r.priority, 0)
    requeued = requeued + 1
  end
end
count('queued', requeued)
count('dead', buried)
write_counters()
write_counts()
delete_ended()
return requeued + buried
