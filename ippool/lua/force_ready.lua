-- force_ready: make a slot ready to rotate now, dropping its live leases (on-call `pool rotate --force`).
-- KEYS[1] = the host's leases sorted set
-- KEYS[2] = the slot's hash
-- ARGV[1] = the slot index (lease members of this slot start with "<slot>:")
-- Returns the number of leases dropped, or -1 when the slot is neither active, retiring nor ready (empty or
-- rotating: nothing changed). The senders holding the dropped leases keep sending through the slot's private IP,
-- which the rotation moves to a fresh address.

local state = redis.call('HGET', KEYS[2], 'state')
if state ~= 'active' and state ~= 'retiring' and state ~= 'ready' then
  return -1
end
local prefix = ARGV[1] .. ':'
local dropped = 0
for _, member in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  if string.sub(member, 1, #prefix) == prefix then
    redis.call('ZREM', KEYS[1], member)
    dropped = dropped + 1
  end
end
redis.call('HSET', KEYS[2], 'state', 'ready')
return dropped
