-- put_address: place an address in a slot, unfenced (first placement, tests, reconcile from AWS tags).
-- KEYS[1] = host meta hash (primary_ip, budget_min, budget_max, slot_count, leases_retired)
-- KEYS[2] = the slot's hash
-- KEYS[3] = the slot's used key (reset to 0, or to the budget when spent)
-- ARGV[1] = slot index
-- ARGV[2] = private IP, ARGV[3] = public IP ("" if none), ARGV[4] = allocation id ("" if none)
-- ARGV[5] = a uniform draw in [0, 1): the budget is budget_min + floor(draw * (budget_max - budget_min + 1))
-- ARGV[6] = "spent" to place the address with its budget already used (reconcile rebuilding an address whose sends
--           it cannot count: retiring at once, so no lease lands on it between placement and any later call)
-- Returns {generation, budget}: the slot is active with used = 0 (or retiring with used = budget when spent) and
-- generation + 1. Live leases still count.
-- Errors when the host is not registered.

local m = redis.call('HMGET', KEYS[1], 'primary_ip', 'slot_count')
if not m[1] then
  return redis.error_reply('ippool: unknown host')
end
local placed = place(KEYS[1], KEYS[2], KEYS[3], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6] == 'spent')
if tonumber(ARGV[1]) + 1 > tonumber(m[2] or '0') then
  redis.call('HSET', KEYS[1], 'slot_count', tonumber(ARGV[1]) + 1)
end
return placed
