-- reserve.lua: reserve one send on the least-used eligible mailbox among those given (all in one group).
-- A mailbox is eligible when it is not paused, not held (parked for the day, cooling down, breaker open),
-- today's count is below today's cap, and now - last send >= min gap + today's jitter.
-- KEYS[1]     = group reservation sequence (string counter)
-- KEYS[2]     = group pending reservations (zset: token -> reserved at, ms)
-- KEYS[3i]    = mailbox i state (hash), for i = 1..n
-- KEYS[3i+1]  = mailbox i schedule (zset: "day|cap|day_number|state" -> local midnight, ms)
-- KEYS[3i+2]  = mailbox i day counts (hash: day -> reservations counted that day)
-- ARGV[1]     = now in ms, or "" for Redis TIME
-- ARGV[2]     = how long an unsettled reservation stays in the pending set, ms
-- Returns {"reserved", i, token, day, count, cap, now}
--      or {status, i, retry_after_ms (-1 = until resumed), reason, now} with status one of
--         skipped-paused, skipped-cooldown, skipped-daily-limit (the soonest-available mailbox's reason)
--      or {"stale", i, ...}  the schedules of these mailboxes must be extended, then call again
--      or {"unknown", i}     no such mailbox

local now
if ARGV[1] ~= "" then
  now = tonumber(ARGV[1])
else
  local t = redis.call("TIME")
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local keep_ms = tonumber(ARGV[2])
local n = (#KEYS - 2) / 3
-- Day counts kept per mailbox: today, yesterday and a spare for clocks a little behind.
local KEEP_DAYS = 3

local best, best_count, best_last
local skip_status, skip_retry, skip_reason, skip_index
local stale = {}

local function consider_skip(i, status, retry, reason)
  -- Prefer the mailbox that frees up soonest; "until resumed" (-1) ranks last.
  local better = skip_status == nil
    or (retry >= 0 and (skip_retry < 0 or retry < skip_retry))
  if better then
    skip_status, skip_retry, skip_reason, skip_index = status, retry, reason, i
  end
end

local days, caps = {}, {}
for i = 1, n do
  local state_key, schedule_key, counts_key = KEYS[3 * i], KEYS[3 * i + 1], KEYS[3 * i + 2]
  if redis.call("EXISTS", state_key) == 0 then
    return {"unknown", i}
  end
  local current = redis.call("ZREVRANGEBYSCORE", schedule_key, now, "-inf", "LIMIT", 0, 1)
  local upcoming = redis.call("ZRANGEBYSCORE", schedule_key, "(" .. string.format("%d", now), "+inf",
    "WITHSCORES", "LIMIT", 0, 1)
  if #current == 0 or #upcoming == 0 then
    stale[#stale + 1] = i
  else
    local day, cap = string.match(current[1], "^([^|]+)|(%d+)|")
    cap = tonumber(cap)
    days[i], caps[i] = day, cap
    local next_day = tonumber(upcoming[2])
    local f = redis.call("HMGET", state_key, "paused", "pause_reason", "hold_until_ms", "hold_status",
      "hold_reason", "breaker_open_until_ms", "last_send_ms", "min_gap_ms", "jitter_lo_ms", "jitter_hi_ms",
      "jitter_seed")
    local hold_until = tonumber(f[3] or "0") or 0
    local breaker_until = tonumber(f[6] or "0") or 0
    local count = tonumber(redis.call("HGET", counts_key, day) or "0")
    local last = tonumber(f[7] or "-1") or -1
    local gap = tonumber(f[8]) or 0
    local lo, hi = tonumber(f[9]) or 0, tonumber(f[10]) or 0
    local jitter = lo
    if hi > lo then
      jitter = lo + tonumber(string.sub(redis.sha1hex(f[11] .. "|" .. day), 1, 8), 16) % (hi - lo + 1)
    end
    if f[1] == "1" then
      consider_skip(i, "skipped-paused", -1, f[2] or "paused")
    elseif hold_until > now then
      consider_skip(i, f[4] or "skipped-cooldown", hold_until - now, f[5] or "held")
    elseif breaker_until > now then
      consider_skip(i, "skipped-cooldown", breaker_until - now, "circuit breaker open")
    elseif count >= cap then
      consider_skip(i, "skipped-daily-limit", next_day - now, "sent " .. count .. " of " .. cap .. " today")
    elseif last >= 0 and now - last < gap + jitter then
      consider_skip(i, "skipped-cooldown", last + gap + jitter - now,
        string.format("gap of %.1f s since the last send", (gap + jitter) / 1000))
    elseif best == nil or count < best_count or (count == best_count and last < best_last) then
      best, best_count, best_last = i, count, last
    end
  end
end

if #stale > 0 then
  local reply = {"stale"}
  for _, i in ipairs(stale) do reply[#reply + 1] = i end
  return reply
end

if best == nil then
  return {skip_status, skip_index, skip_retry, skip_reason, now}
end

local state_key, counts_key = KEYS[3 * best], KEYS[3 * best + 2]
local day, count = days[best], best_count + 1
local address = redis.call("HGET", state_key, "address")
redis.call("HSET", counts_key, day, count)
-- A caller's explicit `now` may lag another's: the last send never moves backwards.
if now > best_last then redis.call("HSET", state_key, "last_send_ms", string.format("%d", now)) end
if redis.call("HLEN", counts_key) > KEEP_DAYS then
  local oldest
  for _, d in ipairs(redis.call("HKEYS", counts_key)) do
    if oldest == nil or d < oldest then oldest = d end
  end
  redis.call("HDEL", counts_key, oldest)
end
local token = redis.call("INCR", KEYS[1]) .. ":" .. day .. ":" .. address
redis.call("ZADD", KEYS[2], now, token)
redis.call("ZREMRANGEBYSCORE", KEYS[2], "-inf", now - keep_ms)
return {"reserved", best, token, day, count, caps[best], now}
