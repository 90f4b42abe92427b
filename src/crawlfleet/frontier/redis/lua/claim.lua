-- Lease up to `limit` due requests; returns a flat list: token, request JSON, token, ...
-- First moves retries whose not-before has come into their domain queues. Then serves the
-- domains of `ready` with ready_at <= now, earliest first: a domain at its in-flight limit is
-- parked; otherwise it gives one request (delay_s > 0) or up to its free slots (delay_s = 0),
-- its ready_at becomes now + delay_s, and it is parked if that filled its slots.
-- KEYS[1] req
-- KEYS[2] delayed
-- KEYS[3] ready
-- KEYS[4] parked
-- KEYS[5] next
-- KEYS[6] inflight
-- KEYS[7] policy
-- KEYS[8] leases
-- KEYS[9] lease
-- KEYS[10] counts
-- KEYS[11] seq
-- KEYS[12] order
-- ARGV[1] queue key prefix
-- ARGV[2] now (epoch s)
-- ARGV[3] lease_s
-- ARGV[4] default delay_s
-- ARGV[5] default max_in_flight
-- ARGV[6] limit
-- ARGV[7] most retries to move into their queues in this call

local now = tonumber(ARGV[2])
local expires_at = now + tonumber(ARGV[3])
local limit = tonumber(ARGV[6])

local due = redis.call('ZRANGEBYSCORE', K.delayed, '-inf', now, 'LIMIT', 0, tonumber(ARGV[7]))
for _, fp in ipairs(due) do
  redis.call('ZREM', K.delayed, fp)
  local r = stored_request(fp)
  enqueue(r.domain, fp, r.priority)
end

local function policy(domain)
  local raw = redis.call('HGET', K.policy, domain)
  if raw then
    local delay, max = string.match(raw, '^(%S+) (%S+)$')
    return tonumber(delay), tonumber(max)
  end
  return tonumber(ARGV[4]), tonumber(ARGV[5])
end

local function park(domain)
  redis.call('ZREM', K.ready, domain)
  redis.call('ZADD', K.parked, ready_at(domain), domain)
end

local out = {}
local got = 0
local visited = {}
local nvisited = 0
while got < limit do
  local domains = redis.call('ZRANGEBYSCORE', K.ready, '-inf', now,
    'LIMIT', 0, nvisited + limit - got)
  local progressed = false
  for _, domain in ipairs(domains) do
    if got >= limit then
      break
    end
    if not visited[domain] then
      visited[domain] = true
      nvisited = nvisited + 1
      progressed = true
      local delay, max = policy(domain)
      local inflight = tonumber(redis.call('HGET', K.inflight, domain) or '0')
      local queue = QPREFIX .. domain
      if inflight >= max then
        park(domain)
      else
        local take = delay > 0 and 1 or (max - inflight)
        take = math.min(take, limit - got)
        local popped = redis.call('ZPOPMIN', queue, take)
        local n = #popped / 2
        if n > 0 then
          local base = redis.call('INCRBY', K.seq, n) - n
          for j = 1, n do
            local fp = popped[2 * j - 1]
            local token = fp .. '.' .. (base + j)
            redis.call('HSET', K.lease, token, fp)
            redis.call('ZADD', K.leases, expires_at, token)
            table.insert(out, token)
            table.insert(out, redis.call('HGET', K.req, fp))
          end
          got = got + n
          inflight = inflight + n
          redis.call('HSET', K.inflight, domain, inflight)
          redis.call('HINCRBY', K.counts, 'queued', -n)
          redis.call('HINCRBY', K.counts, 'leased', n)
          local next_at = now + delay
          redis.call('HSET', K.next, domain, fmt(next_at))
          redis.call('ZADD', K.ready, 'XX', next_at, domain)
        end
        if inflight >= max then
          park(domain)
        elseif redis.call('EXISTS', queue) == 0 then
          redis.call('ZREM', K.ready, domain)
        end
      end
    end
  end
  if not progressed then
    break
  end
end
return out
