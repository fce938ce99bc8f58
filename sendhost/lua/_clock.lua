-- Prelude of every script that reads the time, in ippool and warmup (prepended when loaded; never registered alone).
-- KEYS: none of its own. ARGV: none of its own; each script passes its "now" argument to now_ms.
-- Defines now_ms(arg): the caller's clock in ms (tests, the simulator) or, when arg is "" or absent, the server's
-- TIME, so every sender host, rotator and guard shares one clock.

local function now_ms(arg)
  if arg ~= nil and arg ~= '' then
    return tonumber(arg)
  end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

