-- renew: push a live lease's expiry to now + ttl.
-- KEYS[1] = leases sorted set
-- ARGV[1] = lease member "<slot>:<token>"
-- ARGV[2] = now in ms, or "" for the server's TIME
-- ARGV[3] = time to live in ms
-- Returns 1 when renewed, 0 when the lease is gone or already expired (an expired lease is never revived).

local expiry = redis.call('ZSCORE', KEYS[1], ARGV[1])
local now = now_ms(ARGV[2])
if not expiry or tonumber(expiry) <= now then
  return 0
end
redis.call('ZADD', KEYS[1], 'XX', now + tonumber(ARGV[3]), ARGV[1])
return 1
