-- Prelude of restore.lua and restore_campaign.lua: raising a day's counter in a hash that keeps two days, as a
-- mailbox's state and a campaign's counters do: (day, day_count), the current day, and (prev_day, prev_count).
-- KEYS: none of its own; the caller passes the hash. ARGV: none of its own.
-- Defines raise_day_count(key, day, count): `day`'s count raised to at least `count`, never lowered; a day after
-- the current one becomes it (the current one moves to prev). Returns the day's count after, or nil for a day
-- older than both (left alone: the reservation refuses such a day anyway).

local function raise_day_count(key, day, count)
  local f = redis.call("HMGET", key, "day", "day_count", "prev_day", "prev_count")
  if f[1] == day then
    count = math.max(count, tonumber(f[2] or "0"))
    redis.call("HSET", key, "day_count", count)
  elseif f[3] == day then
    count = math.max(count, tonumber(f[4] or "0"))
    redis.call("HSET", key, "prev_count", count)
  elseif not f[1] or day > f[1] then
    redis.call("HSET", key, "prev_day", f[1] or "", "prev_count", f[2] or "0", "day", day, "day_count", count)
  else
    return nil
  end
  return count
end
