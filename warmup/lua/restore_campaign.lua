-- restore_campaign.lua: raise a campaign's counters on its day to what the sender's ledger shows (after Redis lost
-- its data), as restore.lua does a mailbox's. Never lowers them: when in doubt, under-send. After the day-count
-- prelude (_day_count.lua).
-- KEYS[1] = the campaign's counters (hash, see reserve.lua: day, day_count, prev_day, prev_count and
--           mbx:<address> = "<campaign day>|<count>")
-- ARGV[1] = the campaign's current day (ISO date in its time zone)
-- ARGV[2] = the campaign's sends the ledger shows on that day
-- ARGV[3..] = pairs of a mailbox's address and its sends of the campaign that day
-- Returns the campaign's count of the day after the restore.
local day = ARGV[1]
local count = raise_day_count(KEYS[1], day, tonumber(ARGV[2]))
if not count then
  return tonumber(ARGV[2])  -- a day older than both the hash keeps: reserve refuses it anyway
end
for i = 3, #ARGV - 1, 2 do
  local field = "mbx:" .. ARGV[i]
  local shown = tonumber(ARGV[i + 1])
  local value = redis.call("HGET", KEYS[1], field)
  local held_day, held = nil, nil
  if value then held_day, held = string.match(value, "^([^|]*)|(%d+)$") end
  if held_day == day then
    redis.call("HSET", KEYS[1], field, day .. "|" .. math.max(shown, tonumber(held)))
  elseif not held_day or day > held_day then
    redis.call("HSET", KEYS[1], field, day .. "|" .. shown)
  end
end
return count
