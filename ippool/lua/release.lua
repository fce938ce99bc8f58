-- release: end a lease (one round trip).
-- KEYS[1] = leases sorted set
-- KEYS[2] = the leased slot's hash
-- ARGV[1] = lease member "<slot>:<token>"
-- Returns 0 when the lease was already gone (expired and reaped, or released), 1 when released,
-- 2 when released and it was the last live lease of a retiring slot, which is now ready to rotate.

if redis.call('ZREM', KEYS[1], ARGV[1]) == 0 then
  return 0
end
local live = redis.call('HINCRBY', KEYS[2], 'live', -1)
if live <= 0 then
  if live < 0 then
    redis.call('HSET', KEYS[2], 'live', 0)
  end
  if redis.call('HGET', KEYS[2], 'state') == 'retiring' then
    redis.call('HSET', KEYS[2], 'state', 'ready')
    return 2
  end
end
return 1
