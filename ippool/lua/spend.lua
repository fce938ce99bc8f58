-- spend: use up the rest of a slot's budget, so that its address takes no new lease (a receiving server blamed
-- it: its reputation, a block list). What the sender's ACL user may do on its own host: INCR can only add, as a
-- lease does, so a sender can take its own address out of service but never give one more sends. The spent slot
-- then goes the way of every spent slot: reap.lua (admin) stores it retiring or ready, the rotator replaces its
-- address, and the released address is denied for 7 days.
-- KEYS[1] = the slot's hash: only read
-- KEYS[2] = the slot's used key (a string, INCR)
-- ARGV[1] = the generation of the address the caller leased
-- Returns the number of sends it used up: 0 when the slot holds another address than the one leased (its
-- generation moved on: an innocent address), is not active, or is spent already.

local f = redis.call('HMGET', KEYS[1], 'state', 'budget', 'generation', 'used')
if f[1] ~= 'active' or f[3] ~= ARGV[1] then
  return 0
end
local used = slot_used(redis.call('GET', KEYS[2]), f[4])
if used == nil then
  return 0  -- a legacy count not carried over yet: lease.lua leases nothing from it anyway
end
local left = tonumber(f[2]) - used
for _ = 1, left do
  redis.call('INCR', KEYS[2])
end
return math.max(left, 0)
