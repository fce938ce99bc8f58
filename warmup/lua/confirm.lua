-- confirm.lua: settle a reservation whose send went out; it keeps counting against its day.
-- KEYS[1] = group settled reservations (zset: token -> settled at, ms)
-- KEYS[2] = the reservation's mailbox state (hash): sends confirmed on its latest day, as (confirmed_day,
--           confirmed_count), so `status` tells a send that went out from a reservation still in flight
-- ARGV[1] = now in ms, or "" for Redis TIME
-- ARGV[2] = reservation token
-- ARGV[3] = how long settled tokens are remembered, ms (longer than any reservation can stay in flight)
-- Returns 1 when this settled the reservation, 0 when it was already settled (confirmed or cancelled).
local now = now_ms(ARGV[1])
local added = redis.call("ZADD", KEYS[1], "NX", now, ARGV[2])
if added == 1 then
  local day = string.match(ARGV[2], "^%d+:([^:]+):")
  local f = redis.call("HMGET", KEYS[2], "confirmed_day", "confirmed_count")
  if day and f[1] == day then
    redis.call("HINCRBY", KEYS[2], "confirmed_count", 1)
  elseif day and (not f[1] or day > f[1]) then
    redis.call("HSET", KEYS[2], "confirmed_day", day, "confirmed_count", 1)
  end
end
redis.call("ZREMRANGEBYSCORE", KEYS[1], "-inf", now - tonumber(ARGV[3]))
return added
