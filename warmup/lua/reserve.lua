-- reserve.lua: reserve one send on the least-used eligible mailbox among those given (all in one group).
-- A mailbox is eligible when it is not paused, not held (parked for the day, cooling down, breaker open),
-- its day's count is below the day's cap, now - last send >= min gap, and now >= the next eligible time.
-- Each reservation draws a fresh jitter for the gap after it (from the mailbox's seed and its reservation
-- number, so tests can predict it: warmup.days.jitter_ms) and stores the next eligible time it makes.
-- KEYS[2i-1]  = mailbox i state (hash: settings, day counters, last send, pause/hold/breaker), i = 1..n
-- KEYS[2i]    = mailbox i schedule (zset: "day|cap|next_midnight_ms|day_number|state" -> local midnight, ms)
-- KEYS[2n+1]  = the campaign's counters, when the send is for a campaign (an odd number of KEYS says so; hash:
--               day, day_count, prev_day, prev_count, next_ms (the campaign's pace), and
--               mbx:<address> = "<campaign day>|<count>")
-- ARGV[1]     = now in ms, or "" (or nothing) for Redis TIME
-- ARGV[2]     = open time left in the row's sending window today, ms, or "" (no window: no pace)
-- ARGV[3..6]  = with a campaign key: its day (ISO date in the campaign's time zone), its daily cap or "", each
--               mailbox's share of it per day or "", the end of its day (ms)
-- Returns one tab-separated string (one bulk reply is the cheapest to send and parse on this hot path):
--   reserved <TAB> i <TAB> token <TAB> count <TAB> cap <TAB> now <TAB> the campaign's count ("" without one)
--   <status> <TAB> i <TAB> retry_after_ms (-1 = until resumed) <TAB> now <TAB> reason
--       status: skipped-paused | skipped-cooldown | skipped-daily-limit | skipped-not-started (of the
--       soonest-available mailbox; skipped-not-started: registered ahead of its first day)
--   skipped-campaign-cap <TAB> 0 <TAB> retry_after_ms <TAB> now <TAB> reason   (the campaign's day is full)
--   stale <TAB> i ...   these mailboxes' schedules must be extended; call again after
--   unknown <TAB> i     no such mailbox
-- Counters live in the state hash as (day, day_count) and (prev_day, prev_count): the current and the
-- previous local day, so a caller whose `now` lags just past midnight still counts against its own day.
-- The day's schedule row is cached in the state hash (`today` = "midnight_ms|row"), so most calls skip the
-- schedule lookup; refresh_schedule deletes the cache together with the rows.
-- A reservation needs no record of its own: it counts from here on, and only settling it (confirm.lua,
-- cancel.lua) writes its token, so an unknown outcome simply keeps it counted.
-- The campaign's slot is taken before the mailbox's (a full campaign refuses before any mailbox is looked at) and
-- in the same call, so both count or neither; cancel.lua frees both when it frees the mailbox's.
-- Pace (docs/campaigns.md#pace): with ARGV[2], the next eligible time is at least now + W / (r + 1) + jitter, where
-- W is the window's open time left and r the mailbox's sends left today after this one: the r sends and the
-- window's end split what is left into r + 1 equal parts, recomputed at every send so the spread adapts.
-- A campaign with a daily cap is paced the same way, over its own remaining cap (next_ms in its hash): else a cap
-- far below its mailboxes' combined caps would be spent in the window's first hour, however well each mailbox is
-- paced. Its pace holds no mailbox: a send refused for it is `skipped-campaign-cap` until next_ms.

local function duration(ms)
  -- Rounded up to the second, like warmup.days.format_duration: a wait shown is never shorter than the real one.
  local s = math.ceil(ms / 1000)
  if s < 60 then return s .. " s" end
  if s < 3600 then return math.floor(s / 60) .. " min " .. s % 60 .. " s" end
  local m = math.ceil(s / 60)
  if m < 48 * 60 then return math.floor(m / 60) .. " h " .. m % 60 .. " min" end
  local h = math.ceil(m / 60)
  return math.floor(h / 24) .. " d " .. h % 24 .. " h"
end

local function count_on(day, counted_day, count, prev_day, prev_count)
  -- A mailbox's or a campaign's count on `day`, from the two days it keeps (the current one and the one before);
  -- nil for a day older than both (a caller's clock far behind: not known, so not allowed); 0 for a new day.
  if day == counted_day then return tonumber(count) end
  if day == prev_day then return tonumber(prev_count) end
  if counted_day and day < counted_day then return nil end
  return 0
end

local now = now_ms(ARGV[1])
local n = math.floor(#KEYS / 2)
local campaign, c_day, c_cap, c_share, c_ends, c_count, c_fields
if #KEYS % 2 == 1 then
  campaign, c_day, c_cap, c_share, c_ends = KEYS[#KEYS], ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5]),
    tonumber(ARGV[6])
  c_fields = redis.call("HMGET", campaign, "day", "day_count", "prev_day", "prev_count", "next_ms")
  c_count = count_on(c_day, c_fields[1], c_fields[2], c_fields[3], c_fields[4])
  if c_count == nil or (c_cap and c_count >= c_cap) then
    local reason = "now is before the days this campaign counts"
    if c_count then reason = "campaign reserved " .. c_count .. " of its " .. c_cap .. " on " .. c_day end
    return string.format("skipped-campaign-cap\t0\t%d\t%d\t%s", math.max(c_ends - now, 0), now, reason)
  end
  local c_next = tonumber(c_fields[5] or "0")
  if c_cap and ARGV[2] and ARGV[2] ~= "" and c_next > now then
    return string.format("skipped-campaign-cap\t0\t%d\t%d\t%s", c_next - now, now, "campaign reserved " ..
      c_count .. " of its " .. c_cap .. " on " .. c_day .. ", spread over its window: next in " ..
      duration(c_next - now))
  end
end

local function share_count(address)
  -- This mailbox's reservations for the campaign on the campaign's day; nil when the field is of a later day
  -- (a caller whose clock lags): not known, so not allowed.
  local value = redis.call("HGET", campaign, "mbx:" .. address)
  if not value then return 0 end
  local day, count = string.match(value, "^([^|]*)|(%d+)$")
  if day == c_day then return tonumber(count) end
  if day and day > c_day then return nil end
  return 0
end

local best, best_count, best_last, best_day, best_cap, best_fields, best_address
local best_gap, best_lo, best_hi, best_seed
local skip_status, skip_retry, skip_reason, skip_index
local stale = {}
local not_started = false

local function consider_skip(i, status, retry, reason)
  -- Prefer the mailbox that frees up soonest; "until resumed" (-1) ranks last.
  if skip_status == nil or (retry >= 0 and (skip_retry < 0 or retry < skip_retry)) then
    skip_status, skip_retry, skip_reason, skip_index = status, retry, reason, i
  end
end

for i = 1, n do
  -- Only what every call needs; reasons are read when a mailbox is skipped.
  local f = redis.call("HMGET", KEYS[2 * i - 1], "guard", "paused", "hold_until_ms", "breaker_open_until_ms",
    "last_send_ms", "day", "day_count", "prev_day", "prev_count", "seq", "today", "next_send_ms")
  if not f[1] then
    return "unknown\t" .. i
  end
  -- `guard` = "min_gap_ms|jitter_lo_ms|jitter_hi_ms|jitter_seed|address", written once by add_mailbox.
  local gap, lo, hi, seed, address = string.match(f[1], "^(%d+)|(%d+)|(%d+)|([^|]*)|(.*)$")
  local day, cap, next_day, day_start, current
  if f[11] then
    day_start, day, cap, next_day = string.match(f[11], "^(%d+)|([^|]+)|(%d+)|(%d+)|")
    day_start, next_day = tonumber(day_start), tonumber(next_day)
    current = day_start <= now and now < next_day
  end
  if not current then
    local row = redis.call("ZREVRANGEBYSCORE", KEYS[2 * i], now, "-inf", "WITHSCORES", "LIMIT", 0, 1)
    if row[1] then
      day, cap, next_day = string.match(row[1], "^([^|]+)|(%d+)|(%d+)|")
      next_day = tonumber(next_day)
      current = next_day > now
      -- Cache only forwards: a caller whose `now` lags must not evict today's row.
      if current and (not f[6] or day >= f[6]) then
        redis.call("HSET", KEYS[2 * i - 1], "today", row[2] .. "|" .. row[1])
      end
    else
      -- No day at or before now: a mailbox registered ahead of its first day waits for it.
      local first = redis.call("ZRANGEBYSCORE", KEYS[2 * i], "(" .. now, "+inf", "WITHSCORES", "LIMIT", 0, 1)
      if first[1] and string.match(first[1], "^[^|]+|%d+|%d+|1|") then
        not_started = true
        consider_skip(i, "skipped-not-started", tonumber(first[2]) - now,
          "first sending day is " .. string.match(first[1], "^([^|]+)|"))
      end
    end
  end
  if not_started then
    not_started = false
  elseif not current then
    stale[#stale + 1] = i
  else
    cap = tonumber(cap)
    local count = count_on(day, f[6], f[7], f[8], f[9])
    local last = tonumber(f[5] or "-1")
    gap, lo, hi = tonumber(gap), tonumber(lo), tonumber(hi)
    -- The earliest next send: the minimum gap always; the jitter drawn at the last send when it was stored
    -- (a mailbox written before jitter per send: the low end of its jitter).
    local eligible = last + gap + lo
    if f[12] then eligible = math.max(last + gap, tonumber(f[12])) end
    if f[2] == "1" then
      consider_skip(i, "skipped-paused", -1, redis.call("HGET", KEYS[2 * i - 1], "pause_reason") or "paused")
    elseif tonumber(f[3] or "0") > now then
      local held = redis.call("HMGET", KEYS[2 * i - 1], "hold_status", "hold_reason")
      consider_skip(i, held[1] or "skipped-cooldown", tonumber(f[3]) - now, held[2] or "held")
    elseif tonumber(f[4] or "0") > now then
      consider_skip(i, "skipped-cooldown", tonumber(f[4]) - now, "circuit breaker open")
    elseif count == nil then
      consider_skip(i, "skipped-daily-limit", next_day - now, "now is before the days this mailbox counts")
    elseif count >= cap then
      consider_skip(i, "skipped-daily-limit", next_day - now, "reserved " .. count .. " of " .. cap .. " today")
    elseif c_share and (share_count(address) or c_share) >= c_share then
      consider_skip(i, "skipped-daily-limit", math.max(c_ends - now, 0),
        "reserved its share of " .. c_share .. " for the campaign on " .. c_day)
    elseif last >= 0 and now < eligible then
      consider_skip(i, "skipped-cooldown", eligible - now,
        "needs " .. duration(eligible - last) .. " between sends; " .. duration(eligible - now) .. " left")
    elseif best == nil or count < best_count or (count == best_count and last < best_last) then
      best, best_count, best_last, best_day, best_cap, best_fields, best_address = i, count, last, day, cap, f,
        address
      best_gap, best_lo, best_hi, best_seed = gap, lo, hi, seed
    end
  end
end

if #stale > 0 then
  return "stale\t" .. table.concat(stale, "\t")
end

if best == nil then
  return string.format("%s\t%d\t%d\t%d\t%s", skip_status, skip_index, skip_retry, now, skip_reason)
end

local f = best_fields
local count = best_count + 1
local seq = tonumber(f[10] or "0") + 1
local token = seq .. ":" .. best_day .. ":" .. best_address
local state = KEYS[2 * best - 1]
-- A caller's explicit `now` may lag another's: the last send and the next eligible time never move backwards.
local last_ms = math.max(now, best_last)
local jitter = best_lo
if best_hi > best_lo then
  jitter = best_lo + tonumber(string.sub(redis.sha1hex(best_seed .. "|" .. seq), 1, 8), 16) % (best_hi - best_lo + 1)
end
local next_ms = math.max(last_ms + best_gap + jitter, tonumber(f[12] or "0"))
local window_left = tonumber(ARGV[2] or "")
if window_left and window_left > 0 and best_cap > count then
  next_ms = math.max(next_ms, now + math.floor(window_left / (best_cap - count + 1)) + jitter)
end
local last, next_send = string.format("%d", last_ms), string.format("%d", next_ms)
if best_day == f[6] then
  redis.call("HSET", state, "day_count", count, "last_send_ms", last, "seq", seq, "next_send_ms", next_send)
elseif best_day == f[8] then
  redis.call("HSET", state, "prev_count", count, "last_send_ms", last, "seq", seq, "next_send_ms", next_send)
else -- a new day: today's counter becomes the previous day's
  redis.call("HSET", state, "prev_day", f[6] or "", "prev_count", f[7] or "0", "day", best_day,
    "day_count", count, "last_send_ms", last, "seq", seq, "next_send_ms", next_send)
end
local campaign_count = ""
if campaign then
  campaign_count = c_count + 1
  if c_day == c_fields[1] then
    redis.call("HSET", campaign, "day_count", campaign_count)
  elseif c_day == c_fields[3] then
    redis.call("HSET", campaign, "prev_count", campaign_count)
  else -- a new day for the campaign: today's counter becomes the previous day's
    redis.call("HSET", campaign, "prev_day", c_fields[1] or "", "prev_count", c_fields[2] or "0", "day", c_day,
      "day_count", campaign_count)
  end
  local share = share_count(best_address)
  if share then redis.call("HSET", campaign, "mbx:" .. best_address, c_day .. "|" .. (share + 1)) end
  if c_cap and window_left and window_left > 0 and c_cap > campaign_count then
    redis.call("HSET", campaign, "next_ms",
      string.format("%d", now + math.floor(window_left / (c_cap - campaign_count + 1))))
  end
end
return string.format("reserved\t%d\t%s\t%d\t%d\t%d\t%s", best, token, count, best_cap, now, campaign_count)
