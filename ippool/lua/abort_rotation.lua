-- abort_rotation: give back a slot a rotator claimed but could not rotate, so it is ready again.
-- KEYS[1] = the slot's hash
-- ARGV[1] = the generation the rotator holds
-- Returns 1 when the slot went back to "ready", 0 when it is not rotating at that generation.

local s = redis.call('HMGET', KEYS[1], 'state', 'generation')
if s[1] ~= 'rotating' or s[2] ~= ARGV[1] then
  return 0
end
redis.call('HSET', KEYS[1], 'state', 'ready')
return 1
