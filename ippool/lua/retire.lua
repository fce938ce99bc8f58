-- retire: stop new leases on an active slot now (on-call `pool retire`), whatever its used count.
-- KEYS[1] = the slot's hash
-- KEYS[2] = the host's leases sorted set
-- ARGV[1] = the slot index
-- ARGV[2] = now in ms, or "" for the server's TIME
-- Returns the slot's state afterwards: "retiring" (live leases remain), "ready" (none remain), or the
-- unchanged state of a slot that was neither active nor retiring ("ready", "rotating"), or "empty" (no address).

local state = redis.call('HGET', KEYS[1], 'state')
if not state then
  return 'empty'
end
if state ~= 'active' and state ~= 'retiring' then
  return state
end
-- A retiring slot is looked at again: its last lease may have been released since (release leaves the state).
state = 'ready'
if live_leases(KEYS[2], now_ms(ARGV[2]))[tonumber(ARGV[1])] then
  state = 'retiring'
end
redis.call('HSET', KEYS[1], 'state', state)
return state
