-- restore.lua: raise a mailbox's counters to what its own send log shows (after Redis lost its data).
-- Never lowers them: when in doubt, under-send. After the day-count prelude (_day_count.lua).
-- KEYS[1] = mailbox state (hash; counters as (day, day_count) and (prev_day, prev_count))
-- ARGV[1] = the mailbox's current day (ISO date)
-- ARGV[2] = sends the log shows on that day
-- ARGV[3] = the log's latest send, ms (or -1)
-- Returns {count of the day, last_send_ms} after the restore.
local day = ARGV[1]
local held_last = redis.call("HGET", KEYS[1], "last_send_ms")
local count = raise_day_count(KEYS[1], day, tonumber(ARGV[2])) or tonumber(ARGV[2])
-- What the log shows went out: raise the day's confirmed sends too.
local c = redis.call("HMGET", KEYS[1], "confirmed_day", "confirmed_count")
if c[1] == day then
  redis.call("HSET", KEYS[1], "confirmed_count", math.max(tonumber(ARGV[2]), tonumber(c[2] or "0")))
elseif not c[1] or day > c[1] then
  redis.call("HSET", KEYS[1], "confirmed_day", day, "confirmed_count", tonumber(ARGV[2]))
end
local last = math.max(tonumber(ARGV[3]), tonumber(held_last or "-1"))
if last >= 0 then
  redis.call("HSET", KEYS[1], "last_send_ms", string.format("%d", last))
end
return {count, last}
