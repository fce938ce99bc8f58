-- lease: grant one send on the least-used active slot of a host (the hot path: one round trip).
-- KEYS[1] = host meta hash (primary_ip, slot_count)
-- KEYS[2] = leases sorted set: member "<slot>:<token>", score = expiry in ms
-- KEYS[3..] = slot hashes 0..k-1 (the caller's guess of the slot count; see "resize")
-- ARGV[1] = now in ms, or "" for the server's TIME
-- ARGV[2] = time to live in ms
-- ARGV[3] = lease token, unique per lease
-- Returns {"leased", primary_ip, slot_count, slot, private_ip, public_ip, member, generation}
--      or {"fallback", primary_ip, slot_count}   no active slot with used < budget
--      or {"unknown"}                            the host is not registered
--      or {"resize", slot_count}                 fewer slot keys than slots were passed: nothing done, call again
-- Reaps expired leases first. used counts at lease time; at used == budget the slot turns "retiring".

local primary_ip = redis.call('HGET', KEYS[1], 'primary_ip')
if not primary_ip then
  return {'unknown'}
end
local count = slot_count()
if count > #KEYS - 2 then
  return {'resize', count}
end
local now = now_ms(ARGV[1])
reap_expired(now)

local best, best_used
for index = 0, count - 1 do
  local s = redis.call('HMGET', KEYS[3 + index], 'state', 'used', 'budget')
  if s[1] == 'active' then
    local used = tonumber(s[2])
    if used < tonumber(s[3]) and (best == nil or used < best_used) then
      best, best_used = index, used
    end
  end
end
if best == nil then
  return {'fallback', primary_ip, count}
end

local slot_key = KEYS[3 + best]
local used = redis.call('HINCRBY', slot_key, 'used', 1)
redis.call('HINCRBY', slot_key, 'live', 1)
local s = redis.call('HMGET', slot_key, 'budget', 'private_ip', 'public_ip', 'generation')
if used >= tonumber(s[1]) then
  redis.call('HSET', slot_key, 'state', 'retiring')
end
local member = best .. ':' .. ARGV[3]
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[2]), member)
return {'leased', primary_ip, count, best, s[2], s[3] or '', member, tonumber(s[4] or '0')}
