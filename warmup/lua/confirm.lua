-- confirm.lua: settle a reservation whose send went out; it keeps counting against its day.
-- KEYS[1] = group settled reservations (zset: token -> settled at, ms)
-- ARGV[1] = now in ms, or "" for Redis TIME
-- ARGV[2] = reservation token
-- ARGV[3] = how long settled tokens are remembered, ms (longer than any reservation can stay in flight)
-- Returns 1 when this settled the reservation, 0 when it was already settled (confirmed or cancelled).
local now = now_ms(ARGV[1])
local added = redis.call("ZADD", KEYS[1], "NX", now, ARGV[2])
redis.call("ZREMRANGEBYSCORE", KEYS[1], "-inf", now - tonumber(ARGV[3]))
return added
