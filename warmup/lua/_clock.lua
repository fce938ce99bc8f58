-- Prelude prepended to the warm-up scripts that read the clock (never registered alone).
-- Defines now_ms(arg): the caller's clock in ms (tests, the simulator) or, when arg is "" or absent, Redis TIME.
local function now_ms(arg)
  if arg ~= nil and arg ~= "" then
    return tonumber(arg)
  end
  local t = redis.call("TIME")
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

