-- reap: drop expired leases of a host and list its slots that are ready to rotate.
-- KEYS[1] = host meta hash
-- KEYS[2] = leases sorted set
-- KEYS[3..] = slot hashes 0..n-1, every slot of the host
-- ARGV[1] = now in ms, or "" for the server's TIME
-- Returns {reaped_count, ready_slot, ready_generation, ready_slot, ready_generation, ...}
-- Errors when the caller passed fewer slot keys than the host has (call again after re-reading slot_count).

if not slot_count_ok() then
  return redis.error_reply('ippool: slot count changed; re-read it and retry')
end
local reaped = reap_expired(now_ms(ARGV[1]))
local reply = {reaped}
for index = 0, slot_count() - 1 do
  local s = redis.call('HMGET', KEYS[3 + index], 'state', 'generation')
  if s[1] == 'ready' then
    table.insert(reply, index)
    table.insert(reply, tonumber(s[2]))
  end
end
return reply
