-- reap: drop a host's expired leases, store as retiring every active slot whose used count reached its budget
-- (lease.lua only stops leasing it), make ready every retiring slot that no live lease holds, and list the ready
-- slots (a rotator's poll). It also carries a slot's count over from the slot hash's legacy `used` field (written
-- before the count had a key of its own) into its used key, once: lease.lua does not lease such a slot until then.
-- KEYS[1] = host meta hash
-- KEYS[2] = leases sorted set
-- KEYS[3..] = slot 0..n-1's hash and used key, in pairs, every slot of the host
-- ARGV[1] = now in ms, or "" for the server's TIME
-- Returns {reaped_count, ready_slot, ready_generation, ready_slot, ready_generation, ...}
-- Errors when the caller passed fewer slot keys than the host has (call again after re-reading slot_count).

local count = tonumber(redis.call('HGET', KEYS[1], 'slot_count') or '0')
if count > (#KEYS - 2) / 2 then
  return redis.error_reply('ippool: slot count changed; re-read it and retry')
end
local now = now_ms(ARGV[1])
local reply = {redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)}
local live = live_leases(KEYS[2], now)
for index = 0, count - 1 do
  local slot_key, used_key = KEYS[3 + 2 * index], KEYS[4 + 2 * index]
  local s = redis.call('HMGET', slot_key, 'state', 'generation', 'budget', 'used')
  local state = s[1]
  if s[4] then  -- a count from before the used key: carry it over once (the key, if any, already holds more)
    if not redis.call('GET', used_key) then
      redis.call('SET', used_key, s[4])
    end
    redis.call('HDEL', slot_key, 'used')
  end
  if state == 'active' and tonumber(redis.call('GET', used_key) or '0') >= tonumber(s[3]) then
    state = 'retiring'
  end
  if state == 'retiring' and not live[index] then
    state = 'ready'
  end
  if state ~= s[1] then
    redis.call('HSET', slot_key, 'state', state)
  end
  s[1] = state
  if s[1] == 'ready' then
    table.insert(reply, index)
    table.insert(reply, tonumber(s[2]))
  end
end
return reply
