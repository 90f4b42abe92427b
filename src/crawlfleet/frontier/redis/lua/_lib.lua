-- Helpers shared by every script; the loader puts them after a preamble defining
-- K (key or key family name -> KEYS[i], from the script's header) and EPOCH (ARGV[1]).

local PRIORITY_LIMIT = 65535        -- priorities are clamped to +-this for ordering only
local SEQ_SPAN = 68719476736        -- 2^36: FIFO order wraps after this many enqueues

local function fmt(x)
  return string.format('%.17g', x)
end

-- A JSON number that reads back exactly, as a float (cjson keeps only 14 digits).
local function jfloat(x)
  local s = fmt(x)
  if not string.find(s, '[%.eEn]') then
    s = s .. '.0'
  end
  return s
end

-- Every script that writes calls this first: a crawl whose epoch is gone (FLUSHALL, a
-- restart without persistence) or another (deleted and created again) is not touched.
local function check_epoch()
  if redis.call('GET', K.epoch) ~= EPOCH then
    error({err = 'FRONTIER_LOST the crawl epoch is missing or changed'})
  end
end

-- Keys of the families (see keys.py): the family name passed as a key, then the suffix.
local function lane(kind, domain)
  return K.q .. ':' .. kind .. ':' .. domain
end

local function ready_index(kind)
  return K.ready .. ':' .. kind
end

local function delayed_index(kind)
  return K.delayed .. ':' .. kind
end

local function domain_key(domain)
  return K.domain .. ':' .. domain
end

local function queue_score(priority, seq)
  local p = math.max(-PRIORITY_LIMIT, math.min(PRIORITY_LIMIT, priority))
  return -p * SEQ_SPAN + (seq % SEQ_SPAN)
end

local kinds_cache = nil  -- the members of K.kinds, read once per script call

local function kinds()
  if not kinds_cache then
    kinds_cache = redis.call('SMEMBERS', K.kinds)
  end
  return kinds_cache
end

local function note_kind(kind)
  for _, known in ipairs(kinds()) do
    if known == kind then
      return
    end
  end
  redis.call('SADD', K.kinds, kind)
  table.insert(kinds_cache, kind)
end

local function ready_at(domain)
  return tonumber(redis.call('HGET', domain_key(domain), 'ready_at') or '0')
end

-- t as a lower bound of the domain's score in every ready index holding it (a score may be
-- later: see enqueue).
local function raise_ready_scores(domain, t)
  for _, kind in ipairs(kinds()) do
    redis.call('ZADD', ready_index(kind), 'XX', 'GT', t, domain)
  end
end

local function stored_request(fp)
  return cjson.decode(redis.call('HGET', K.req, fp))
end

-- Put fp in its lane at its admission place (a new fp: the end of its priority class);
-- unless the domain is parked, its ready score for that kind becomes at most the later of
-- its ready_at and `due` (a retry's not-before; 0 for other requests). The caller counts fp
-- as queued. `new`: fp was never admitted, so it has no place yet (add.lua).
local function enqueue(kind, domain, fp, priority, due, new)
  local seq = not new and redis.call('HGET', K.order, fp)
  if not seq then
    seq = redis.call('INCR', K.seq)
    redis.call('HSET', K.order, fp, seq)
  end
  redis.call('ZADD', lane(kind, domain), queue_score(priority, tonumber(seq)), fp)
  note_kind(kind)
  if redis.call('SISMEMBER', K.parked, domain) == 0 then
    redis.call('ZADD', ready_index(kind), 'LT', math.max(ready_at(domain), due), domain)
  end
end

-- Changes of the crawl's counts (K.counts: queued, leased, ...), summed in the call and
-- written once a name by write_counts, which each script that counts calls before it ends.
local count_changes = {}

local function count(name, n)
  count_changes[name] = (count_changes[name] or 0) + n
end

local function write_counts()
  for name, n in pairs(count_changes) do
    if n ~= 0 then
      redis.call('HINCRBY', K.counts, name, n)
    end
  end
  count_changes = {}
end

-- Leases ended in this call: their tokens, deleted from K.lease and K.leases by
-- delete_ended, which each script that ends leases calls before it ends (one command a key
-- for all of them).
local ended_tokens = {}
local ended = {}

-- End a lease; the fingerprint it held, or false when the token is not current (or was
-- ended earlier in this call).
local function end_lease(token)
  local fp = not ended[token] and redis.call('HGET', K.lease, token)
  if not fp then
    return false
  end
  ended[token] = true
  table.insert(ended_tokens, token)
  count('leased', -1)
  return fp
end

local function delete_ended()
  if #ended_tokens > 0 then
    redis.call('HDEL', K.lease, unpack(ended_tokens))
    redis.call('ZREM', K.leases, unpack(ended_tokens))
  end
  ended_tokens = {}
  ended = {}
end

-- Take the domain out of every ready index until a lease ends (it is at its in-flight cap).
local function park(domain)
  redis.call('SADD', K.parked, domain)
  for _, kind in ipairs(kinds()) do
    redis.call('ZREM', ready_index(kind), domain)
  end
end

-- Put a parked domain back into the ready index of each of its non-empty lanes.
local function unpark(domain)
  if redis.call('SREM', K.parked, domain) == 1 then
    local at = ready_at(domain)
    for _, kind in ipairs(kinds()) do
      if redis.call('EXISTS', lane(kind, domain)) == 1 then
        redis.call('ZADD', ready_index(kind), at, domain)
      end
    end
  end
end

-- One lease of the domain ended: free its slot and unpark the domain.
local function release_slot(domain)
  redis.call('HINCRBY', domain_key(domain), 'inflight', -1)
  unpark(domain)
end

-- The member of K.dead for fp: its admission seq, zero-padded, then fp, so dead letters that
-- died at one time sort in admission order; false when fp has no seq (not queued, leased or
-- dead).
local function dead_member(fp)
  local seq = redis.call('HGET', K.order, fp)
  return seq and string.format('%016d', tonumber(seq)) .. ':' .. fp
end

local function append_error(fp, err)
  local raw = redis.call('HGET', K.errors, fp)
  local history = raw and cjson.decode(raw) or {}
  table.insert(history, err)
  redis.call('HSET', K.errors, fp, cjson.encode(history))
end

-- Add counters (a JSON object: name -> number) to the crawl's and the domain's statistics,
-- summed in doubles as Python sums them (HINCRBYFLOAT would take a call per counter and sum
-- in long double). A name is read from its hash the first time a call adds to it, and every
-- sum is written once, by write_counters, which each script that adds calls before it ends:
-- a call that ends many leases writes each hash once.
local counted = {}  -- hash key -> name -> the sum so far in this call

local function add_counters(domain, json)
  local added = cjson.decode(json)
  for _, key in ipairs({K.stats, K.dstats .. ':' .. domain}) do
    local sums = counted[key]
    if not sums then
      sums = {}
      counted[key] = sums
    end
    local unread = {}
    for name in pairs(added) do
      if sums[name] == nil then
        table.insert(unread, name)
      end
    end
    if #unread > 0 then
      local current = redis.call('HMGET', key, unpack(unread))
      for i, name in ipairs(unread) do
        sums[name] = tonumber(current[i]) or 0
      end
    end
    for name, value in pairs(added) do
      sums[name] = sums[name] + value
    end
  end
end

local function write_counters()
  for key, sums in pairs(counted) do
    local fields = {}
    for name, sum in pairs(sums) do
      table.insert(fields, name)
      table.insert(fields, fmt(sum))
    end
    if #fields > 0 then
      redis.call('HSET', key, unpack(fields))
    end
  end
  counted = {}
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
  count('seen', 1)
end

-- The strategy ladder (frontier/ladder.py): the rungs of a comma-separated list, the rung of a
-- level ('slow' past the last), and the domain's strategy slot moved with its level.
local function ladder_rungs(spec)
  local rungs = {}
  for name in string.gmatch(spec, '[^,]+') do
    table.insert(rungs, name)
  end
  return rungs
end

local function rung_of(rungs, level)
  return rungs[level] or 'slow'
end

local function strategy_number(strategy, name)
  local value = strategy[name]
  if type(value) == 'string' and string.match(value, '^%d+$') then
    return tonumber(value)
  end
  return 0
end

-- The domain's strategy slot after its level moved (up or down) to `level`: written to the
-- record at `key` and returned as JSON.
local function move_strategy(key, rungs, up, level)
  local raw = redis.call('HGET', key, 'strategy')
  local s = raw and cjson.decode(raw) or {}
  if up then
    local name = rung_of(rungs, level)
    if name == 'session' then
      s.session_epoch = tostring(strategy_number(s, 'session_epoch') + 1)
    elseif name == 'tier' then
      local tiers = 0
      for _, r in ipairs(rungs) do
        if r == 'tier' then
          tiers = tiers + 1
        end
      end
      s.tier = tostring(math.min(strategy_number(s, 'tier') + 1, tiers))
    elseif name == 'impersonate' or name == 'browser' then
      s.fetcher = name
    end
  else
    local left = rung_of(rungs, level + 1)
    if left == 'tier' then
      s.tier = tostring(math.max(strategy_number(s, 'tier') - 1, 0))
    elseif left == 'impersonate' or left == 'browser' then
      local below = nil
      for i = 1, math.min(level, #rungs) do
        if rungs[i] == 'impersonate' or rungs[i] == 'browser' then
          below = rungs[i]
        end
      end
      s.fetcher = below
    end
  end
  if level > 0 then
    s.rung = rung_of(rungs, level)
  else
    s.rung = nil
  end
  local json = cjson.encode(s)
  redis.call('HSET', key, 'strategy', json)
  return json
end
