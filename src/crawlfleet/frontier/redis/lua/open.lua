-- Create the crawl (config, epoch, counts) unless it exists; returns {epoch, config fields
-- and values flat}, epoch '' when the crawl exists without its epoch or counts (lost).
-- KEYS[1] config
-- KEYS[2] epoch
-- KEYS[3] counts
-- ARGV[1] the epoch token for a new crawl
-- ARGV[2..] config field, value, field, value, ...

local exists = redis.call('EXISTS', K.config, K.epoch, K.counts)
if exists == 0 then
  for i = 2, #ARGV, 2 do
    redis.call('HSET', K.config, ARGV[i], ARGV[i + 1])
  end
  redis.call('SET', K.epoch, EPOCH)
  redis.call('HSET', K.counts, 'queued', 0, 'leased', 0, 'done', 0, 'dead', 0, 'seen', 0,
    'admitted', 0)
elseif exists < 3 then
  return {'', unpack(redis.call('HGETALL', K.config))}
end
return {redis.call('GET', K.epoch), unpack(redis.call('HGETALL', K.config))}
