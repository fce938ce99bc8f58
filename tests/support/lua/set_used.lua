-- set_used (tests only): raise a slot's used count, as if that many sends were made; it never lowers it.
-- KEYS[1] = the slot's hash
-- KEYS[2] = the slot's used key
-- KEYS[3] = the host's leases sorted set
-- ARGV[1] = the used count the caller knows to be at least true
-- ARGV[2] = the slot index
-- ARGV[3] = now in ms, or "" for the server's TIME
-- Returns {used, state} afterwards; an active slot at or above its budget turns retiring (ready if no lease
-- is live), as the rotator's reap would store it. Errors when the slot holds no address.

local s = redis.call('HMGET', KEYS[1], 'state', 'budget')
if not s[1] then
  return redis.error_reply('ippool: slot holds no address')
end
local used = math.max(tonumber(redis.call('GET', KEYS[2]) or '0'), tonumber(ARGV[1]))
redis.call('SET', KEYS[2], used)
local state = s[1]
if state == 'active' and used >= tonumber(s[2]) then
  state = 'ready'
  if live_leases(KEYS[3], now_ms(ARGV[3]))[tonumber(ARGV[2])] then
    state = 'retiring'
  end
  redis.call('HSET', KEYS[1], 'state', state)
end
return {used, state}
