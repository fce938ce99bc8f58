-- cancel.lua: settle a reservation whose send failed, and apply the failure class's response to the mailbox.
-- KEYS[1] = group settled reservations (zset: token -> settled at, ms)
-- KEYS[2] = mailbox state (hash; counters as (day, day_count) and (prev_day, prev_count))
-- KEYS[3] = mailbox schedule (zset: "day|cap|next_midnight_ms|day_number|state" -> local midnight, ms)
-- KEYS[4] = mailbox breaker failures (zset: token -> failed at, ms)
-- KEYS[5] = the campaign's counters, when the reservation was for one (see reserve.lua)
-- ARGV[1] = now in ms, or "" for Redis TIME
-- ARGV[2] = reservation token ("seq:day:address")
-- ARGV[3] = frees the slot: 1 (definite rejection) or 0 (quota, rate limit: the slot stays used)
-- ARGV[4] = mailbox action: none | park-day | cool-down | disconnect
-- ARGV[5] = reason shown while held or paused
-- ARGV[6] = counts for the breaker: 1 or 0
-- ARGV[7] = system-wide successes in the breaker window (read just before)
-- ARGV[8] = breaker: failures that trip it      ARGV[9]  = breaker window, ms
-- ARGV[10] = breaker: successes it needs         ARGV[11] = how long a trip holds the mailbox, ms
-- ARGV[12] = trips in one day that disconnect    ARGV[13] = cool-down, ms
-- ARGV[14] = with KEYS[5]: the campaign's day the reservation counted on
-- Freeing the mailbox's slot frees the campaign's with it (they were taken together); settled once, so once.
-- Returns {settled (1, or 0 when already settled), freed, failures_in_window, tripped, disconnected, now}
local now = now_ms(ARGV[1])
-- Settle once: a second cancel (or a cancel after confirm) must not free the slot twice.
if redis.call("ZADD", KEYS[1], "NX", now, ARGV[2]) == 0 then
  return {0, 0, 0, 0, 0, now}
end
local token_day = string.match(ARGV[2], "^%d+:([^:]+):")
local state = KEYS[2]
local freed = 0
if ARGV[3] == "1" then
  local f = redis.call("HMGET", state, "day", "day_count", "prev_day", "prev_count")
  local field
  if f[1] == token_day then field = "day_count" elseif f[3] == token_day then field = "prev_count" end
  local count = field and tonumber(f[field == "day_count" and 2 or 4] or "0") or 0
  if count > 0 then
    redis.call("HSET", state, field, count - 1)
    freed = 1
  end
end
if freed == 1 and KEYS[5] then
  local campaign, c_day = KEYS[5], ARGV[14]
  local c = redis.call("HMGET", campaign, "day", "day_count", "prev_day", "prev_count")
  local c_field, c_count
  if c[1] == c_day then c_field, c_count = "day_count", tonumber(c[2] or "0") end
  if c[3] == c_day then c_field, c_count = "prev_count", tonumber(c[4] or "0") end
  if c_field and c_count > 0 then redis.call("HSET", campaign, c_field, c_count - 1) end
  local share_field = "mbx:" .. string.match(ARGV[2], "^%d+:[^:]+:(.*)$")
  local day, count = string.match(redis.call("HGET", campaign, share_field) or "", "^([^|]*)|(%d+)$")
  if day == c_day and tonumber(count) > 0 then
    redis.call("HSET", campaign, share_field, c_day .. "|" .. (tonumber(count) - 1))
  end
end

local function hold(until_ms, status)
  local current = tonumber(redis.call("HGET", state, "hold_until_ms") or "0") or 0
  if until_ms > current then
    redis.call("HSET", state, "hold_until_ms", string.format("%d", until_ms), "hold_status", status,
      "hold_reason", ARGV[5])
  end
end

local action = ARGV[4]
if action == "park-day" then
  local current = redis.call("ZREVRANGEBYSCORE", KEYS[3], now, "-inf", "LIMIT", 0, 1)
  local until_ms = now + 86400000
  if #current > 0 then until_ms = tonumber(string.match(current[1], "^[^|]+|%d+|(%d+)|")) end
  hold(until_ms, "skipped-daily-limit")
elseif action == "cool-down" then
  hold(now + tonumber(ARGV[13]), "skipped-cooldown")
elseif action == "disconnect" then
  redis.call("HSET", state, "paused", "1", "pause_reason", ARGV[5])
end

local in_window, tripped, disconnected = 0, 0, 0
if ARGV[6] == "1" then
  local window = tonumber(ARGV[9])
  redis.call("ZADD", KEYS[4], now, ARGV[2])
  redis.call("ZREMRANGEBYSCORE", KEYS[4], "-inf", now - window)
  in_window = redis.call("ZCARD", KEYS[4])
  -- With no recent successes anywhere the failures are the system's (an outage), not this inbox's.
  if in_window >= tonumber(ARGV[8]) and tonumber(ARGV[7]) >= tonumber(ARGV[10]) then
    tripped = 1
    redis.call("DEL", KEYS[4])
    local current = redis.call("ZREVRANGEBYSCORE", KEYS[3], now, "-inf", "LIMIT", 0, 1)
    local today = token_day
    if #current > 0 then today = string.match(current[1], "^([^|]+)|") end
    local f = redis.call("HMGET", state, "trip_day", "trips")
    local trips = 1
    if f[1] == today then trips = (tonumber(f[2] or "0") or 0) + 1 end
    redis.call("HSET", state, "trip_day", today, "trips", trips)
    if trips >= tonumber(ARGV[12]) then
      disconnected = 1
      redis.call("HSET", state, "paused", "1",
        "pause_reason", "disconnected: circuit breaker tripped " .. trips .. " times on " .. today)
    else
      redis.call("HSET", state, "breaker_open_until_ms", string.format("%d", now + tonumber(ARGV[11])))
    end
  end
end
return {1, freed, in_window, tripped, disconnected, now}
