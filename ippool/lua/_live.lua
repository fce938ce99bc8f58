-- Prelude of the scripts that ask whether a slot still has live leases (prepended after the clock prelude).
-- KEYS: none of its own; the caller passes its leases sorted set. ARGV: none of its own.
-- Defines live_leases(leases_key, now): slot index -> number of leases whose expiry is after `now`. The lease
-- set is the only record of liveness (no per-slot counter that a lost release or a dead holder could skew).

local function live_leases(leases_key, now)
  local live = {}
  for _, member in ipairs(redis.call('ZRANGEBYSCORE', leases_key, '(' .. now, '+inf')) do
    local slot = tonumber(string.match(member, '^(%d+):'))
    if slot then
      live[slot] = (live[slot] or 0) + 1
    end
  end
  return live
end

