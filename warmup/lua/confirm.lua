-- confirm.lua: settle a reservation whose send went out; it keeps counting against its day.
-- KEYS[1] = group pending reservations (zset: token -> reserved at, ms)
-- ARGV[1] = reservation token
-- Returns 1 when the reservation was pending, 0 when it was already settled or expired.
return redis.call("ZREM", KEYS[1], ARGV[1])
