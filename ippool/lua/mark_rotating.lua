-- mark_rotating: claim a ready slot for rotation (compare-and-set on its generation).
-- KEYS[1] = the slot's hash
-- KEYS[2] = the slot's used key
-- ARGV[1] = the generation the rotator saw when it listed the slot as ready
-- Returns the slot's fields as a flat list (HGETALL, with `used` read from the used key when it exists) when
-- claimed, now in state "rotating"; false (nil) when the slot is not ready at that generation (another rotator
-- claimed it, or it changed).

local s = redis.call('HMGET', KEYS[1], 'state', 'generation')
if s[1] ~= 'ready' or s[2] ~= ARGV[1] then
  return false
end
redis.call('HSET', KEYS[1], 'state', 'rotating')
local fields = redis.call('HGETALL', KEYS[1])
local used = redis.call('GET', KEYS[2])
if used then
  table.insert(fields, 'used')
  table.insert(fields, used)
end
return fields
