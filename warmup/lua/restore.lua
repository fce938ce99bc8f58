-- restore.lua: raise a mailbox's counters to what its own send log shows (after Redis lost its data).
-- Never lowers them: when in doubt, under-send.
-- KEYS[1] = mailbox state (hash)
-- KEYS[2] = mailbox day counts (hash: day -> reservations counted that day)
-- ARGV[1] = the mailbox's current day (ISO date)
-- ARGV[2] = sends the log shows on that day
-- ARGV[3] = the log's latest send, ms (or -1)
-- Returns {count of the day, last_send_ms} after the restore.
local count = math.max(tonumber(ARGV[2]), tonumber(redis.call("HGET", KEYS[2], ARGV[1]) or "0"))
redis.call("HSET", KEYS[2], ARGV[1], count)
local last = math.max(tonumber(ARGV[3]), tonumber(redis.call("HGET", KEYS[1], "last_send_ms") or "-1"))
if last >= 0 then
  redis.call("HSET", KEYS[1], "last_send_ms", string.format("%d", last))
end
return {count, last}
