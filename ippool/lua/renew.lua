-- renew: push a live lease's expiry to now + ttl.
-- KEYS[1] = leases sorted set
-- ARGV[1] = lease member "<slot>:<token>"
-- ARGV[2] = now in ms, or "" for the server's TIME
-- ARGV[3] = time to live in ms
-- Returns 1 when renewed, 0 when the lease is gone or already expired (an expired lease is never revived).

local expiry = redis.call('ZSCORE', KEYS[1], ARGV[1])
local now
if ARGV[2] ~= '' then
  now = tonumber(ARGV[2])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
if not expiry or tonumber(expiry) <= now then
  return 0
end
redis.call('ZADD', KEYS[1], 'XX', now + tonumber(ARGV[3]), ARGV[1])
return 1
