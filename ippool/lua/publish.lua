-- publish: a rotator puts a new address into a slot it marked rotating, fenced by the slot's generation.
-- KEYS[1] = host meta hash (budget_min, budget_max, leases_retired)
-- KEYS[2] = the slot's hash
-- ARGV[1] = the generation the rotator holds (returned by mark_rotating)
-- ARGV[2] = private IP, ARGV[3] = public IP, ARGV[4] = allocation id
-- ARGV[5] = a uniform draw in [0, 1) for the fresh budget (see put_address.lua)
-- Returns {generation + 1, budget} on success; false (nil) when the slot is not rotating at that generation,
-- i.e. the rotator is stale and must not touch the slot.

local s = redis.call('HMGET', KEYS[2], 'state', 'generation')
if s[1] ~= 'rotating' or s[2] ~= ARGV[1] then
  return false
end
local m = redis.call('HMGET', KEYS[1], 'budget_min', 'budget_max')
local low, high = tonumber(m[1]), tonumber(m[2])
local budget = math.min(high, low + math.floor(tonumber(ARGV[5]) * (high - low + 1)))
-- The outgoing address's sends stay counted in leases_retired (metrics: leases = that + every used).
redis.call('HINCRBY', KEYS[1], 'leases_retired', tonumber(redis.call('HGET', KEYS[2], 'used') or '0'))
local generation = redis.call('HINCRBY', KEYS[2], 'generation', 1)
redis.call('HSET', KEYS[2], 'private_ip', ARGV[2], 'public_ip', ARGV[3], 'allocation_id', ARGV[4],
  'state', 'active', 'used', 0, 'budget', budget)
return {generation, budget}
