-- lease: grant one send on the least-used active slot of a host (the hot path: one round trip).
-- KEYS[1] = host meta hash (primary_ip, slot_count): only read
-- KEYS[2] = leases sorted set: member "<slot>:<token>", score = expiry in ms
-- KEYS[3] = the host's fallback counter (a string, INCR)
-- KEYS[4..] = slot 0..k-1's hash and used key, in pairs (the caller's guess of the slot count; see "resize")
-- ARGV[1] = now in ms, or "" for the server's TIME
-- ARGV[2] = time to live in ms
-- ARGV[3] = lease token, unique per lease
-- Returns one string, fields joined by "|" (one bulk reply parses far faster than an array in a Python client):
--      "leased|primary_ip|slot_count|slot|private_ip|public_ip|generation"   the lease is "<slot>:<token>"
--   or "fallback|primary_ip|slot_count"   no active slot with used < budget (nor with a count not carried over)
--   or "unknown"                          the host is not registered
--   or "resize|slot_count"                fewer slot keys than slots were passed: nothing done, call again
-- used counts at lease time, in the slot's used key (INCR: the sender's ACL user can only add to it); the script
-- never writes the slot hash. An active slot whose used reached its budget is simply not leasable: "spent" is
-- derived, and the rotator's reap.lua (admin) stores it retiring or ready. The script writes only what the lease
-- decides (its slot's used key, its entry in the lease set): it neither counts nor reaps live leases.
-- Liveness is read from the lease set by those who need it (reap.lua when a rotator looks for ready slots,
-- `pool status`), which keeps release a plain ZREM. Fallbacks are counted in a key of their own for the metrics,
-- so the sender's ACL user never writes the meta hash.

local meta = redis.call('HMGET', KEYS[1], 'primary_ip', 'slot_count')
local primary_ip = meta[1]
if not primary_ip then
  return 'unknown'
end
local count = tonumber(meta[2] or '0')
if count > (#KEYS - 3) / 2 then
  return 'resize|' .. count
end

-- One HMGET and one GET per slot read all the slot needs, so a lease costs two calls per slot plus four.
local best, best_used, best_fields
for index = 0, count - 1 do
  local slot_key = KEYS[4 + 2 * index]
  local f = redis.call('HMGET', slot_key, 'state', 'budget', 'private_ip', 'public_ip', 'generation', 'used')
  if f[1] == 'active' then
    local used = slot_used(redis.call('GET', KEYS[5 + 2 * index]), f[6])
    if used ~= nil and used < tonumber(f[2]) and (best == nil or used < best_used) then
      best, best_used, best_fields = index, used, f
    end
  end
end
if best == nil then
  redis.call('INCR', KEYS[3])
  return 'fallback|' .. primary_ip .. '|' .. count
end

redis.call('INCR', KEYS[5 + 2 * best])
redis.call('ZADD', KEYS[2], now_ms(ARGV[1]) + tonumber(ARGV[2]), best .. ':' .. ARGV[3])
return table.concat({'leased', primary_ip, count, best, best_fields[3], best_fields[4] or '', best_fields[5] or '0'},
  '|')
