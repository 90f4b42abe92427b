-- Lease up to `limit` due requests of the given fetcher kinds; returns a flat list: token,
-- request JSON, token, ...
-- First moves retries of those kinds whose not-before has come into their lanes. Then serves
-- the domains of those kinds' ready indexes with ready_at <= now, earliest first (ties by
-- name): a domain at its in-flight cap is parked; otherwise it gives its best requests
-- across the wanted lanes, one (effective delay > 0) or up to its free slots (delay 0), its
-- ready_at becomes now + effective delay (base delay * 2^level), and it is parked if that
-- filled its slots.
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
  local due = redis.call('ZRANGEBYSCORE', index, '-inf', now, 'LIMIT', 0, tonumber(ARGV[7]))
  for _, fp in ipairs(due) do
    redis.call('ZREM', index, fp)
    local r = stored_request(fp)
    enqueue(kind, r.domain, fp, r.priority)
  end
end

-- Pop the domain's best queued fingerprint among the wanted lanes; nil when they are empty.
local function pop_best(domain)
  if #wanted == 1 then
    return redis.call('ZPOPMIN', lane(wanted[1], domain))[1]
  end
  local best_lane, best_fp, best_score = nil, nil, nil
  for _, kind in ipairs(wanted) do
    local head = redis.call('ZRANGE', lane(kind, domain), 0, 0, 'WITHSCORES')
    if head[1] and (not best_score or tonumber(head[2]) < best_score) then
      best_lane, best_fp, best_score = lane(kind, domain), head[1], tonumber(head[2])
    end
  end
  if best_lane then
    redis.call('ZREM', best_lane, best_fp)
  end
  return best_fp
end

local out = {}
local got = 0

-- Serve one due domain: lease what its policy allows, move its ready_at, park it when full.
local function serve(domain)
  local key = domain_key(domain)
  local f = redis.call('HMGET', key, 'inflight', 'delay', 'max', 'level')
  local inflight = tonumber(f[1] or '0')
  local max = tonumber(f[3] or default_max)
  if inflight >= max then
    park(domain)
    return
  end
  local delay = tonumber(f[2] or default_delay) * 2 ^ tonumber(f[4] or '0')
  local take = math.min(delay > 0 and 1 or (max - inflight), limit - got)
  local fps = {}
  for _ = 1, take do
    local fp = pop_best(domain)
    if not fp then
      break
    end
    table.insert(fps, fp)
  end
  local n = #fps
  if n > 0 then
    local base = redis.call('INCRBY', K.seq, n) - n
    for j, fp in ipairs(fps) do
      local token = fp .. '.' .. (base + j)
      redis.call('HSET', K.lease, token, fp)
      redis.call('ZADD', K.leases, expires_at, token)
      table.insert(out, token)
      table.insert(out, redis.call('HGET', K.req, fp))
    end
    got = got + n
    inflight = inflight + n
    redis.call('HSET', key, 'inflight', inflight)
    redis.call('HINCRBY', key, 'queued', -n)
    redis.call('HINCRBY', K.counts, 'queued', -n)
    redis.call('HINCRBY', K.counts, 'leased', n)
    set_ready(domain, now + delay)
  end
  if inflight >= max then
    park(domain)
  else
    for _, kind in ipairs(wanted) do
      if redis.call('EXISTS', lane(kind, domain)) == 0 then
        redis.call('ZREM', ready_index(kind), domain)
      end
    end
  end
end

local visited = {}
local nvisited = 0
local function earlier(a, b)
  return a[1] < b[1] or (a[1] == b[1] and a[2] < b[2])
end
while got < limit do
  local candidates = {}
  for _, kind in ipairs(wanted) do
    local page = redis.call('ZRANGEBYSCORE', ready_index(kind), '-inf', now,
      'WITHSCORES', 'LIMIT', 0, nvisited + limit - got)
    for j = 1, #page, 2 do
      if not visited[page[j]] then
        table.insert(candidates, {tonumber(page[j + 1]), page[j]})
      end
    end
  end
  if #candidates == 0 then
    break
  end
  table.sort(candidates, earlier)
  for _, candidate in ipairs(candidates) do
    if got >= limit then
      break
    end
    local domain = candidate[2]
    if not visited[domain] then
      visited[domain] = true
      nvisited = nvisited + 1
      serve(domain)
    end
  end
end
return out
