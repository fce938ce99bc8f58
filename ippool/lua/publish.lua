-- publish: a rotator puts a new address into a slot it marked rotating, fenced by the slot's generation.
-- KEYS[1] = host meta hash (budget_min, budget_max, leases_retired)
-- KEYS[2] = the slot's hash
-- KEYS[3] = the slot's used key (reset to 0)
-- ARGV[1] = the generation the rotator holds (returned by mark_rotating)
-- ARGV[2] = private IP, ARGV[3] = public IP, ARGV[4] = allocation id
-- ARGV[5] = a uniform draw in [0, 1) for the fresh budget (see _place.lua)
-- Returns {generation + 1, budget} on success; false (nil) when the slot is not rotating at that generation,
-- i.e. the rotator is stale and must not touch the slot.

local s = redis.call('HMGET', KEYS[2], 'state', 'generation')
if s[1] ~= 'rotating' or s[2] ~= ARGV[1] then
  return false
end
return place(KEYS[1], KEYS[2], KEYS[3], ARGV[2], ARGV[3], ARGV[4], ARGV[5], false)
