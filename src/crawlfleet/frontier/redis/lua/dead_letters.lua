-- A page of dead letters, oldest death first (then admission order): flat list of request JSON, errors JSON, died_at.
-- KEYS[1] req
-- KEYS[2] dead
-- KEYS[3] errors
-- ARGV[1] epoch (unused)
-- ARGV[2] offset
-- ARGV[3] limit

local offset, limit = tonumber(ARGV[2]), tonumber(ARGV[3])
local out = {}
if limit <= 0 then
  return out
end
local page = redis.call('ZRANGE', K.dead, offset, offset + limit - 1, 'WITHSCORES')
for i = 1, #page, 2 do
  local fp = string.sub(page[i], 18)  -- after the admission seq (see dead_member)
  table.insert(out, redis.call('HGET', K.req, fp))
  table.insert(out, redis.call('HGET', K.errors, fp) or '[]')
  table.insert(out, page[i + 1])
end
return out
