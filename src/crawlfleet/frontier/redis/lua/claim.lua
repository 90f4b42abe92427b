-- Lease up to `limit` due requests of the given fetcher kinds; returns a flat list: token,
-- request JSON, token, ...
-- First moves retries of those kinds whose not-before has come into their lanes. Then visits
-- lanes one request at a time, the lane with the lowest ready score first (ties: by domain
-- name within a kind, then the kinds in the order given), while that score <= now: a domain
-- at its in-flight cap is parked; otherwise its lane gives its best request, the domain's
-- ready_at becomes now + effective delay (base delay * 2^level, so with a delay of 0 the
-- domain can be visited again in this claim), and it is parked if that filled its slots.
-- KEYS[1] epoch
-- KEYS[2] req
-- KEYS[3] parked
-- KEYS[4] kinds
-- KEYS[5] leases
-- KEYS[6] lease
-- KEYS[7] counts
-- KEYS[8] seq
-- KEYS[9] order
-- KEYS[10] q
-- KEYS[11] delayed
-- KEYS[12] ready
-- KEYS[13] domain
-- ARGV[1] epoch
-- ARGV[2] now (epoch s)
-- ARGV[3] lease_s
-- ARGV[4] default delay_s
-- ARGV[5] default max_in_flight
-- ARGV[6] limit
-- ARGV[7] most retries of each kind to move into their lanes in this call
-- ARGV[8..] the fetcher kinds to serve

check_epoch()
local now = tonumber(ARGV[2])
local expires_at = now + tonumber(ARGV[3])
local default_delay, default_max = tonumber(ARGV[4]), tonumber(ARGV[5])
local limit = tonumber(ARGV[6])
local wanted = {}
for i = 8, #ARGV do
  table.insert(wanted, ARGV[i])
end

for _, kind in ipairs(wanted) do
  local index = delayed_index(kind)
  local due = redis.call('ZRANGEBYSCORE', index, '-inf', now, 'WITHSCORES',
    'LIMIT', 0, tonumber(ARGV[7]))
  for i = 1, #due, 2 do
    local fp = due[i]
    redis.call('ZREM', index, fp)
    local r = stored_request(fp)
    enqueue(kind, r.domain, fp, r.priority, tonumber(due[i + 1]))
  end
end

-- The lane to visit next: its score, domain and kind; nil when no lane is due.
local function next_lane()
  local best_score, best_domain, best_kind = nil, nil, nil
  for _, kind in ipairs(wanted) do
    local top = redis.call('ZRANGE', ready_index(kind), 0, 0, 'WITHSCORES')
    if top[1] and (not best_score or tonumber(top[2]) < best_score) then
      best_score, best_domain, best_kind = tonumber(top[2]), top[1], kind
    end
  end
  if best_score and best_score <= now then
    return best_domain, best_kind
  end
  return nil
end

local out = {}
local taken = 0
while #out < 2 * limit do
  local domain, kind = next_lane()
  if not domain then
    break
  end
  local key = domain_key(domain)
  local f = redis.call('HMGET', key, 'inflight', 'delay', 'max', 'level', 'ready_at', 'queued')
  local inflight = tonumber(f[1] or '0')
  local max = tonumber(f[3] or default_max)
  local q = lane(kind, domain)
  local fp = nil
  if inflight < max then
    fp = redis.call('ZPOPMIN', q)[1]
  end
  if fp then
    local token = fp .. '.' .. redis.call('INCR', K.seq)
    redis.call('HSET', K.lease, token, fp)
    redis.call('ZADD', K.leases, expires_at, token)
    table.insert(out, token)
    table.insert(out, redis.call('HGET', K.req, fp))
    inflight = inflight + 1
    taken = taken + 1
    local delay = tonumber(f[2] or default_delay) * 2 ^ tonumber(f[4] or '0')
    local ready = math.max(tonumber(f[5] or '0'), now + delay)
    -- one write of the domain's record a lease
    redis.call('HSET', key, 'inflight', inflight, 'ready_at', fmt(ready),
      'queued', tonumber(f[6] or '0') - 1)
    raise_ready_scores(domain, ready)
  end
  if inflight >= max then
    park(domain)
  elseif redis.call('EXISTS', q) == 0 then
    redis.call('ZREM', ready_index(kind), domain)
  end
end
if taken > 0 then  -- the crawl's counts once a call, not once a lease
  redis.call('HINCRBY', K.counts, 'queued', -taken)
  redis.call('HINCRBY', K.counts, 'leased', taken)
end
return out
