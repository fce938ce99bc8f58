-- retire: stop new leases on an active slot now (on-call `pool retire`), whatever its used count.
-- KEYS[1] = the slot's hash
-- Returns the slot's state afterwards: "retiring" (live leases remain), "ready" (none remain), or the
-- unchanged state of a slot that was not active ("retiring", "ready", "rotating"), or "empty" (no address).

local s = redis.call('HMGET', KEYS[1], 'state', 'live')
if not s[1] then
  return 'empty'
end
if s[1] ~= 'active' then
  return s[1]
end
local state = 'ready'
if tonumber(s[2] or '0') > 0 then
  state = 'retiring'
end
redis.call('HSET', KEYS[1], 'state', state)
return state
