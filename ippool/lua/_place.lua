-- Prelude of the scripts that put an address into a slot (put_address.lua, publish.lua; prepended when loaded).
-- KEYS: none of its own; each script passes its meta hash, slot hash and used key. ARGV: none of its own.
-- Defines place(meta_key, slot_key, used_key, private_ip, public_ip, allocation_id, draw, spent): draws the address's
-- budget as budget_min + floor(draw * (budget_max - budget_min + 1)) for a uniform draw in [0, 1); keeps the
-- outgoing address's sends in leases_retired (metrics: leases = that + every used); bumps the generation; writes
-- the slot active with used 0, or, when `spent`, retiring with used = budget. The used key is reset here, in the
-- script that bumps the generation, so a count never carries over to the next address; the legacy `used` field of
-- the slot hash is dropped. Returns {generation, budget}.

local function place(meta_key, slot_key, used_key, private_ip, public_ip, allocation_id, draw, spent)
  local m = redis.call('HMGET', meta_key, 'budget_min', 'budget_max')
  local low, high = tonumber(m[1]), tonumber(m[2])
  local budget = math.min(high, low + math.floor(tonumber(draw) * (high - low + 1)))
  local hash_used = redis.call('HGET', slot_key, 'used')
  local old = tonumber(redis.call('GET', used_key) or hash_used or '0')
  redis.call('HINCRBY', meta_key, 'leases_retired', old)
  local generation = redis.call('HINCRBY', slot_key, 'generation', 1)
  local state, used = 'active', 0
  if spent then
    state, used = 'retiring', budget
  end
  redis.call('HSET', slot_key, 'private_ip', private_ip, 'public_ip', public_ip, 'allocation_id', allocation_id,
    'state', state, 'budget', budget)
  redis.call('HDEL', slot_key, 'used')
  redis.call('SET', used_key, used)
  return {generation, budget}
end
