-- Mark fingerprints seen without queueing them; returns how many were new.
-- KEYS[1] seen
-- KEYS[2] bloom
-- KEYS[3] counts
-- ARGV[1] queue key prefix (unused)
-- ARGV[2] Bloom bit positions per fingerprint (0: exact dedup)
-- ARGV[3] bits per Bloom shard
-- ARGV[4..] per fingerprint: the fingerprint, then its bit positions

local nbits = tonumber(ARGV[2])
local shard_bits = tonumber(ARGV[3])
local new = 0
local i = 4
while i <= #ARGV do
  local fp, at = ARGV[i], i + 1
  i = at + nbits
  if not is_seen(fp, at, nbits, shard_bits) then
    set_seen(fp, at, nbits, shard_bits)
    new = new + 1
  end
end
return new
