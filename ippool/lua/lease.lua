-- lease: grant one send on the least-used active slot of a host (the hot path: one round trip).
-- KEYS[1] = host meta hash (primary_ip, slot_count): only read
-- KEYS[2] = leases sorted set: member "<slot>:<token>", score = expiry in ms
-- KEYS[3] = the host's fallback counter (a string, INCR)
-- KEYS[4..] = slot hashes 0..k-1 (the caller's guess of the slot count; see "resize")
-- ARGV[1] = now in ms, or "" for the server's TIME
-- ARGV[2] = time to live in ms
-- ARGV[3] = lease token, unique per lease
-- Returns one string, fields joined by "|" (one bulk reply parses far faster than an array in a Python client):
--      "leased|primary_ip|slot_count|slot|private_ip|public_ip|generation"   the lease is "<slot>:<token>"
--   or "fallback|primary_ip|slot_count"   no active slot with used < budget
--   or "unknown"                          the host is not registered
--   or "resize|slot_count"                fewer slot keys than slots were passed: nothing done, call again
-- used counts at lease time; at used == budget the slot turns "retiring". The script writes only what the lease
-- decides (its slot's used and state, its entry in the lease set): it neither counts nor reaps live leases.
-- Liveness is read from the lease set by those who need it (reap.lua when a rotator looks for ready slots,
-- `pool status`), which keeps release a plain ZREM. Fallbacks are counted in a key of their own for the metrics,
-- so the sender's ACL user never writes the meta hash.

local meta = redis.call('HMGET', KEYS[1], 'primary_ip', 'slot_count')
local primary_ip = meta[1]
if not primary_ip then
  return 'unknown'
end
local count = tonumber(meta[2] or '0')
if count > #KEYS - 3 then
  return 'resize|' .. count
end

-- One HMGET per slot reads all the slot needs, so a lease costs one call per slot plus four.
local best, best_fields
for index = 0, count - 1 do
  local f = redis.call('HMGET', KEYS[4 + index], 'state', 'used', 'budget', 'private_ip', 'public_ip', 'generation')
  if f[1] == 'active' then
    local used = tonumber(f[2])
    if used < tonumber(f[3]) and (best == nil or used < tonumber(best_fields[2])) then
      best, best_fields = index, f
    end
  end
end
if best == nil then
  redis.call('INCR', KEYS[3])
  return 'fallback|' .. primary_ip .. '|' .. count
end

local used = tonumber(best_fields[2]) + 1
if used >= tonumber(best_fields[3]) then
  redis.call('HSET', KEYS[4 + best], 'used', used, 'state', 'retiring')
else
  redis.call('HSET', KEYS[4 + best], 'used', used)
end
redis.call('ZADD', KEYS[2], now_ms(ARGV[1]) + tonumber(ARGV[2]), best .. ':' .. ARGV[3])
return table.concat({'leased', primary_ip, count, best, best_fields[4], best_fields[5] or '', best_fields[6] or '0'},
  '|')
