-- End leases (complete, retry or bury) and record their reports, in one step: each request's
-- new state, the counters, the attempt row, the domain's rest, block window and Retry-After.
-- The leases end in the order given, each as if alone but for what no later lease end of the
-- call reads, left to the call's end and done there once for all: the counters and counts
-- written, the attempt rows pushed, the ended leases and completed requests deleted, each
-- freed domain's ready scores raised and the domain unparked. Each lease end writes its
-- domain's record once. Returns one reply a lease: {0} when the lease is not current
-- (nothing changes), else {1} or, when the block level moved, {1, 'escalated' | 'recovered',
-- level, count, judged, cooldown_until, rung, strategy JSON, rule, kinds}; rung and strategy
-- are '' when there are no rungs (the slot is untouched); rule is 'blocked' (count: blocks)
-- or 'refused' (count: refused or blocked, over kinds of URL), '' on recovery (frontier/
-- policy.py's rules); an error reply when ending it failed.
-- KEYS[1] epoch
-- KEYS[2] req
-- KEYS[3] parked
-- KEYS[4] kinds
-- KEYS[5] leases
-- KEYS[6] lease
-- KEYS[7] dead
-- KEYS[8] errors
-- KEYS[9] counts
-- KEYS[10] order
-- KEYS[11] stats
-- KEYS[12] attempts
-- KEYS[13] q
-- KEYS[14] delayed
-- KEYS[15] ready
-- KEYS[16] domain
-- KEYS[17] dstats
-- ARGV[1] epoch
-- then per lease end ARGV[2..24] (the numbers of the first; the next starts at 25):
-- ARGV[2] lease token
-- ARGV[3] complete | retry | bury
-- ARGV[4] retry: not_before; bury: died_at (epoch s)
-- ARGV[5] retry, bury: the error for the request's history
-- ARGV[6] retry: the request JSON to store (attempt already incremented)
-- ARGV[7] the block window's mark: '' (none), 'o' (success), 'b' (block), else a refused
--   URL's kind (frontier/policy.py's window_mark)
-- ARGV[8] reason (of a block or a Retry-After)
-- ARGV[9] block_until (epoch s; 0: none)
-- ARGV[10] 1 when the attempt fetched something (the domain rests), 0 when skipped
-- ARGV[11] the attempt's time (epoch s)
-- ARGV[12] default delay_s
-- ARGV[13..18] block rules: window, min_samples, threshold, recover_after, max_level,
--   cooldown_s
-- ARGV[19] attempt JSON
-- ARGV[20] counters: a JSON object, name -> number
-- ARGV[21] the ladder's rungs, comma-separated ('' for none): frontier/ladder.py's rules
-- ARGV[22..23] block rules: refusal_threshold, refusal_kinds
-- ARGV[24] 1 when the report is the refusal of a retry: no mark while the window holds an 'o'

check_epoch()
local ARGS = 23  -- a lease end's arguments

-- The rule by which a block window shows a ban (frontier/policy.py's ban_rule): the rule,
-- its count and the number of distinct refusal marks; nil when it shows none.
local function ban_rule(window, size, min_samples, threshold, refusal_threshold, refusal_kinds)
  local judged = #window
  local _, blocks = string.gsub(window, 'b', '')
  if judged >= min_samples and blocks / judged >= threshold then
    return 'blocked', blocks, 0
  end
  if judged < size then
    return nil
  end
  local _, clean = string.gsub(window, 'o', '')
  local refused = judged - clean
  local seen, kinds = {}, 0
  for i = 1, judged do
    local mark = string.sub(window, i, i)
    if mark ~= 'b' and mark ~= 'o' and not seen[mark] then
      seen[mark] = true
      kinds = kinds + 1
    end
  end
  if refused == judged or (refused / judged >= refusal_threshold and kinds >= refusal_kinds) then
    return 'refused', refused, kinds
  end
  return nil
end
-- What the call's lease ends leave to its end, one command a key (or a domain) for all (the
-- ended leases: _lib.lua's end_lease and delete_ended):
local attempts = {}  -- the attempt rows, pushed in one RPUSH
local done = {}      -- the fingerprints completed, deleted from req, errors and order
local domains = {}   -- the domains whose slot a lease freed, in order (once: `freed`), unparked
local freed = {}
local raised = {}    -- domain -> the latest ready_at a lease end set, its ready scores raised

-- End the lease whose arguments start at ARGV[o + 2]; its reply.
local function finish(o)
  local rungs = ladder_rungs(ARGV[o + 21])
  local fp = end_lease(ARGV[o + 2])
  if not fp then
    return {0}
  end
  local r = stored_request(fp)
  local domain = r.domain
  local key = domain_key(domain)
  local mode = ARGV[o + 3]
  if mode == 'complete' then
    table.insert(done, fp)
    count('done', 1)
  elseif mode == 'retry' then
    redis.call('HSET', K.req, fp, ARGV[o + 6])
    append_error(fp, ARGV[o + 5])
    redis.call('ZADD', delayed_index(r.fetcher), ARGV[o + 4], fp)
    redis.call('HINCRBY', key, 'queued', 1)
    count('queued', 1)
  else
    append_error(fp, ARGV[o + 5])
    redis.call('ZADD', K.dead, ARGV[o + 4], dead_member(fp))
    count('dead', 1)
  end

  add_counters(domain, ARGV[o + 20])
  table.insert(attempts, ARGV[o + 19])

  local f = redis.call('HMGET', key, 'ready_at', 'delay', 'level', 'window', 'streak', 'inflight')
  local ready = tonumber(f[1] or '0')
  local base = tonumber(f[2] or ARGV[o + 12])
  local level = tonumber(f[3] or '0')
  local window = f[4] or ''
  local streak = tonumber(f[5] or '0')
  local at = tonumber(ARGV[o + 11])
  local size, min_samples, threshold = tonumber(ARGV[o + 13]), tonumber(ARGV[o + 14]), tonumber(ARGV[o + 15])
  local recover_after, max_level = tonumber(ARGV[o + 16]), tonumber(ARGV[o + 17])
  local new_ready = ready
  local result = {1}
  local fields = {}

  local mark = ARGV[o + 7]
  if ARGV[o + 24] == '1' and string.find(window, 'o', 1, true) then
    mark = ''
  end
  if mark == 'o' then
    window = string.sub(window .. 'o', -size)
    streak = streak + 1
    if level > 0 and streak >= recover_after then
      level = level - 1
      streak = 0
      result = {1, 'recovered', level, 0, 0, '0', '', '', '', 0}
      if #rungs > 0 then
        result[7] = level > 0 and rung_of(rungs, level) or ''
        result[8] = move_strategy(key, rungs, false, level)
      end
    end
    fields = {'level', level, 'window', window, 'streak', streak}
  elseif mark ~= '' then
    window = string.sub(window .. mark, -size)
    if mark == 'b' then
      streak = 0
    end
    local rule, count, kinds = nil, 0, 0
    if level < max_level then
      rule, count, kinds = ban_rule(window, size, min_samples, threshold,
        tonumber(ARGV[o + 22]), tonumber(ARGV[o + 23]))
    end
    if rule then
      local judged = #window
      level = level + 1
      window = ''
      streak = 0
      local cooldown = at + tonumber(ARGV[o + 18]) * 2 ^ (level - 1)
      new_ready = math.max(new_ready, cooldown)
      redis.call('HSET', key, 'cooldown', fmt(cooldown), 'reason', ARGV[o + 8])
      result = {1, 'escalated', level, count, judged, fmt(cooldown), '', '', rule, kinds}
      if #rungs > 0 then
        result[7] = rung_of(rungs, level)
        result[8] = move_strategy(key, rungs, true, level)
      end
    end
    fields = {'level', level, 'window', window, 'streak', streak}
  end

  if ARGV[o + 10] == '1' then
    new_ready = math.max(new_ready, at + base * 2 ^ level)
  end
  local block_until = tonumber(ARGV[o + 9])
  if block_until > 0 then
    new_ready = math.max(new_ready, block_until)
    local until_before = tonumber(redis.call('HGET', key, 'retry_until') or '0')
    redis.call('HSET', key, 'retry_until', fmt(math.max(until_before, block_until)),
      'reason', ARGV[o + 8])
  end
  -- the domain's record written once: its block state, ready_at and the slot this lease held
  table.insert(fields, 'inflight')
  table.insert(fields, tonumber(f[6] or '0') - 1)
  if new_ready > ready then
    table.insert(fields, 'ready_at')
    table.insert(fields, fmt(new_ready))
  end
  redis.call('HSET', key, unpack(fields))
  if new_ready > ready then
    raised[domain] = new_ready
  end
  if not freed[domain] then
    freed[domain] = true
    table.insert(domains, domain)
  end
  return result
end

local replies = {}
for o = 0, #ARGV - 1 - ARGS, ARGS do
  local ok, reply = pcall(finish, o)
  if not ok then
    reply = type(reply) == 'table' and reply or {err = tostring(reply)}
  end
  table.insert(replies, reply)
end
delete_ended()
if #done > 0 then
  redis.call('HDEL', K.req, unpack(done))
  redis.call('HDEL', K.errors, unpack(done))
  redis.call('HDEL', K.order, unpack(done))
end
for _, domain in ipairs(domains) do
  if raised[domain] then
    raise_ready_scores(domain, raised[domain])
  end
  unpark(domain)
end
if #attempts > 0 then
  redis.call('RPUSH', K.attempts, unpack(attempts))
end
write_counters()
write_counts()
return replies
