-- reap: drop a host's expired leases, make ready every retiring slot that no live lease holds, and list the
-- ready slots (a rotator's poll).
-- KEYS[1] = host meta hash
-- KEYS[2] = leases sorted set
-- KEYS[3..] = slot hashes 0..n-1, every slot of the host
-- ARGV[1] = now in ms, or "" for the server's TIME
-- Returns {reaped_count, ready_slot, ready_generation, ready_slot, ready_generation, ...}
-- Errors when the caller passed fewer slot keys than the host has (call again after re-reading slot_count).

local count = tonumber(redis.call('HGET', KEYS[1], 'slot_count') or '0')
if count > #KEYS - 2 then
  return redis.error_reply('ippool: slot count changed; re-read it and retry')
end
local now = now_ms(ARGV[1])
local reply = {redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)}
local live = live_leases(KEYS[2], now)
for index = 0, count - 1 do
  local s = redis.call('HMGET', KEYS[3 + index], 'state', 'generation')
  if s[1] == 'retiring' and not live[index] then
    redis.call('HSET', KEYS[3 + index], 'state', 'ready')
    s[1] = 'ready'
  end
  if s[1] == 'ready' then
    table.insert(reply, index)
    table.insert(reply, tonumber(s[2]))
  end
end
return reply
