-- Feed one page to a parser's drift test on a domain (frontier/drift.py, DriftTest.take: the
-- same arithmetic); when it fires, write the drift mark into the domain's strategy slot.
-- The tests live in the domain's record, field `drift`: a JSON object, parser -> test
-- (DriftTest.to_json; its statistic a '%.17g' string, fired_at -1 while it has not fired).
-- A test that fired and whose mark is gone from the strategy slot starts over first.
-- Returns the test after, as JSON.
-- KEYS[1] epoch
-- KEYS[2] domain
-- KEYS[3] admitted
-- ARGV[1] epoch
-- ARGV[2] domain
-- ARGV[3] parser
-- ARGV[4] 1 if the page mismatched, else 0
-- ARGV[5] the page's items
-- ARGV[6] the page's filled fields: a JSON object, field -> items filling it
-- ARGV[7] threshold
-- ARGV[8] drift share p1
-- ARGV[9] baseline floor
-- ARGV[10] baseline cap
-- ARGV[11] the mark to write when the test fires (paused | seen)

check_epoch()
redis.call('ZADD', K.admitted, 'NX', 0, ARGV[2])  -- listed by domains() from now on
local key = domain_key(ARGV[2])
local parser = ARGV[3]
local mismatched = tonumber(ARGV[4])
local items = tonumber(ARGV[5])
local filled = cjson.decode(ARGV[6])
local threshold, p1 = tonumber(ARGV[7]), tonumber(ARGV[8])
local floor, cap = tonumber(ARGV[9]), tonumber(ARGV[10])
local mark = 'drift.' .. parser

local raw = redis.call('HGET', key, 'drift')
local tests = raw and cjson.decode(raw) or {}
local t = tests[parser]
if t == nil then
  t = {pages = 0, mismatches = 0, rest_pages = 0, rest_mismatches = 0, statistic = '0',
       fired_at = -1, rest_items = 0, rest_filled = {}, run_pages = 0, run_items = 0,
       run_filled = {}}
end
local rawstrategy = redis.call('HGET', key, 'strategy')
local strategy = rawstrategy and cjson.decode(rawstrategy) or {}
local statistic = tonumber(t.statistic)
if t.fired_at >= 0 and strategy[mark] == nil then
  statistic = 0
  t.fired_at = -1
end

local function add(into, counts)
  for name, count in pairs(counts) do
    into[name] = (into[name] or 0) + count
  end
end

t.pages = t.pages + 1
t.mismatches = t.mismatches + mismatched
local share = (t.rest_mismatches + 1) / (t.rest_pages + 2)
local p0 = math.min(math.max(share, floor), cap)
if statistic == 0 then
  t.rest_pages = t.rest_pages + 1
  t.rest_mismatches = t.rest_mismatches + mismatched
end
local step
if mismatched == 1 then
  step = math.log(p1 / p0)
else
  step = math.log((1 - p1) / (1 - p0))
end
statistic = math.max(0, statistic + step)
if statistic == 0 then
  t.rest_items = t.rest_items + items
  add(t.rest_filled, filled)
  t.run_pages, t.run_items, t.run_filled = 0, 0, {}
else
  t.run_pages = t.run_pages + 1
  t.run_items = t.run_items + items
  add(t.run_filled, filled)
end
t.statistic = string.format('%.17g', statistic)
if t.fired_at < 0 and statistic >= threshold then
  t.fired_at = t.pages
  strategy[mark] = ARGV[11]
  redis.call('HSET', key, 'strategy', cjson.encode(strategy))
end
tests[parser] = t
local json = cjson.encode(t)
redis.call('HSET', key, 'drift', cjson.encode(tests))
return json
