-- restore.lua: raise a mailbox's counters to what its own send log shows (after Redis lost its data).
-- Never lowers them: when in doubt, under-send.
-- KEYS[1] = mailbox state (hash; counters as (day, day_count) and (prev_day, prev_count))
-- ARGV[1] = the mailbox's current day (ISO date)
-- ARGV[2] = sends the log shows on that day
-- ARGV[3] = the log's latest send, ms (or -1)
-- Returns {count of the day, last_send_ms} after the restore.
local f = redis.call("HMGET", KEYS[1], "day", "day_count", "prev_day", "prev_count", "last_send_ms")
local day, count = ARGV[1], tonumber(ARGV[2])
if f[1] == day then
  count = math.max(count, tonumber(f[2] or "0"))
  redis.call("HSET", KEYS[1], "day_count", count)
elseif f[3] == day then
  count = math.max(count, tonumber(f[4] or "0"))
  redis.call("HSET", KEYS[1], "prev_count", count)
elseif not f[1] or day > f[1] then
  redis.call("HSET", KEYS[1], "prev_day", f[1] or "", "prev_count", f[2] or "0", "day", day, "day_count", count)
end
-- What the log shows went out: raise the day's confirmed sends too.
local c = redis.call("HMGET", KEYS[1], "confirmed_day", "confirmed_count")
if c[1] == day then
  redis.call("HSET", KEYS[1], "confirmed_count", math.max(tonumber(ARGV[2]), tonumber(c[2] or "0")))
elseif not c[1] or day > c[1] then
  redis.call("HSET", KEYS[1], "confirmed_day", day, "confirmed_count", tonumber(ARGV[2]))
end
local last = math.max(tonumber(ARGV[3]), tonumber(f[5] or "-1"))
if last >= 0 then
  redis.call("HSET", KEYS[1], "last_send_ms", string.format("%d", last))
end
return {count, last}
