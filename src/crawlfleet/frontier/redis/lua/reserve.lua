-- Reserve up to `wanted` admissions of a partitioned crawl's max_total budget (crawl-wide,
-- in the crawl's own slot); returns how many were granted (0 once the budget is spent). The
-- caller admits at most that many and gives back what it did not use (INCRBY -unused).
-- KEYS[1] epoch
-- KEYS[2] budget
-- ARGV[1] epoch
-- ARGV[2] wanted
-- ARGV[3] max_total

check_epoch()
local used = tonumber(redis.call('GET', K.budget) or '0')
local granted = math.min(tonumber(ARGV[2]), tonumber(ARGV[3]) - used)
if granted <= 0 then
  return 0
end
redis.call('INCRBY', K.budget, granted)
return granted
