-- Prelude shared by lease.lua and reap.lua (prepended to them when loaded; never registered alone).
-- KEYS[1] = host meta hash, KEYS[2] = leases sorted set, KEYS[3..] = slot hashes 0..n-1
-- Defines now_ms(arg): the caller's clock (tests, simulator) or, when arg is "", the server's TIME.
-- Defines reap_expired(now): drops leases whose expiry <= now, decrementing their slot's live count; a retiring
-- slot left with no live lease becomes ready to rotate. Returns how many leases were dropped.
-- Defines slot_count_ok(): whether the caller passed a key for every slot the host has.

local function now_ms(arg)
  if arg ~= nil and arg ~= '' then
    return tonumber(arg)
  end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function slot_count()
  return tonumber(redis.call('HGET', KEYS[1], 'slot_count') or '0')
end

local function slot_count_ok()
  return slot_count() <= #KEYS - 2
end

local function drop_live(slot_key)
  local live = redis.call('HINCRBY', slot_key, 'live', -1)
  if live <= 0 then
    if live < 0 then
      redis.call('HSET', slot_key, 'live', 0)
    end
    if redis.call('HGET', slot_key, 'state') == 'retiring' then
      redis.call('HSET', slot_key, 'state', 'ready')
    end
  end
end

local function reap_expired(now)
  local expired = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now)
  for _, member in ipairs(expired) do
    local slot = tonumber(string.match(member, '^(%d+):'))
    local slot_key = slot and KEYS[3 + slot]
    if slot_key then
      drop_live(slot_key)
    end
  end
  if #expired > 0 then
    redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
  end
  return #expired
end

