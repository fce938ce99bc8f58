-- successes.lua: the system-wide window of confirmed sends the circuit breaker consults.
-- KEYS[1] = system successes (zset: token -> confirmed at, ms)
-- ARGV[1] = now in ms, or "" for Redis TIME
-- ARGV[2] = token to record, or "" to only count
-- ARGV[3] = window, ms
-- Returns the number of successes within the window ending now.
local now = now_ms(ARGV[1])
if ARGV[2] ~= "" then
  redis.call("ZADD", KEYS[1], now, ARGV[2])
end
redis.call("ZREMRANGEBYSCORE", KEYS[1], "-inf", now - tonumber(ARGV[3]))
return redis.call("ZCOUNT", KEYS[1], now - tonumber(ARGV[3]), "+inf")
