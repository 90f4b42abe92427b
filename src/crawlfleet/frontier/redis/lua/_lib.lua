-- Helpers shared by every script; the loader puts them after a preamble defining
-- K (key name -> KEYS[i], from the script's header) and QPREFIX (ARGV[1], the queue key prefix).

local PRIORITY_LIMIT = 65535        -- priorities are clamped to +-this for ordering only
local SEQ_SPAN = 68719476736        -- 2^36: FIFO order wraps after this many enqueues

local function fmt(x)
  return string.format('%.17g', x)
end

local function queue_score(priority, seq)
  local p = math.max(-PRIORITY_LIMIT, math.min(PRIORITY_LIMIT, priority))
  return -p * SEQ_SPAN + (seq % SEQ_SPAN)
end

local function ready_at(domain)
  return tonumber(redis.call('HGET', K.next, domain) or '0')
end

local function stored_request(fp)
  return cjson.decode(redis.call('HGET', K.req, fp))
end

-- Put fp in its domain queue at its admission place (a new fp: the end of its priority
-- class); make the domain servable unless it is parked at its in-flight limit.
local function enqueue(domain, fp, priority)
  local seq = redis.call('HGET', K.order, fp)
  if not seq then
    seq = redis.call('INCR', K.seq)
    redis.call('HSET', K.order, fp, seq)
  end
  redis.call('ZADD', QPREFIX .. domain, queue_score(priority, tonumber(seq)), fp)
  if not redis.call('ZSCORE', K.parked, domain) then
    redis.call('ZADD', K.ready, 'NX', ready_at(domain), domain)
  end
end

-- Forget a lease; the fingerprint it held, or false when the token is not current.
local function end_lease(token)
  local fp = redis.call('HGET', K.lease, token)
  if not fp then
    return false
  end
  redis.call('HDEL', K.lease, token)
  redis.call('ZREM', K.leases, token)
  redis.call('HINCRBY', K.counts, 'leased', -1)
  return fp
end

-- Take a parked domain back into `ready` (if its queue holds anything).
local function unpark(domain)
  local at = redis.call('ZSCORE', K.parked, domain)
  if at then
    redis.call('ZREM', K.parked, domain)
    if redis.call('EXISTS', QPREFIX .. domain) == 1 then
      redis.call('ZADD', K.ready, at, domain)
    end
  end
end

-- One lease of the domain ended: free its slot and unpark the domain.
local function release_slot(domain)
  if redis.call('HINCRBY', K.inflight, domain, -1) <= 0 then
    redis.call('HDEL', K.inflight, domain)
  end
  unpark(domain)
end

local function append_error(fp, err)
  local raw = redis.call('HGET', K.errors, fp)
  local history = raw and cjson.decode(raw) or {}
  table.insert(history, err)
  redis.call('HSET', K.errors, fp, cjson.encode(history))
end

-- Seen filter: exact (a SET) when nbits is 0, else a Bloom filter whose global bit positions
-- for this fingerprint are ARGV[at .. at + nbits - 1], in shards of shard_bits bits each
-- (K.bloom .. ':' .. shard, see keys.py).
local shard_keys = {}  -- shard index -> key name, built once per script call

local function bloom_bit(position, shard_bits)
  local p = tonumber(position)
  local shard = math.floor(p / shard_bits)
  local key = shard_keys[shard]
  if not key then
    key = K.bloom .. ':' .. shard
    shard_keys[shard] = key
  end
  return key, p - shard * shard_bits
end

local function is_seen(fp, at, nbits, shard_bits)
  if nbits == 0 then
    return redis.call('SISMEMBER', K.seen, fp) == 1
  end
  for i = at, at + nbits - 1 do
    local key, offset = bloom_bit(ARGV[i], shard_bits)
    if redis.call('GETBIT', key, offset) == 0 then
      return false
    end
  end
  return true
end

local function set_seen(fp, at, nbits, shard_bits)
  if nbits == 0 then
    redis.call('SADD', K.seen, fp)
  else
    for i = at, at + nbits - 1 do
      local key, offset = bloom_bit(ARGV[i], shard_bits)
      redis.call('SETBIT', key, offset, 1)
    end
  end
  redis.call('HINCRBY', K.counts, 'seen', 1)
end
