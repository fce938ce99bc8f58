-- Prelude of lease.lua: reading a slot's used count (prepended after the clock prelude).
-- KEYS: none of its own; the caller passes a slot's hash and its used key. ARGV: none of its own.
-- Defines slot_used(used_value, hash_used): the sends counted on the slot's address, from GET of its used key
-- (`used_value`) and the slot hash's legacy `used` field (`hash_used`, written before the count had a key of its
-- own). The key wins once it exists. A slot with no key but a legacy count above 0 returns nil: its count was not
-- carried over yet (carry_used.lua), so nobody may lease it, or it would get its whole budget again.

local function slot_used(used_value, hash_used)
  if used_value then
    return tonumber(used_value)
  end
  if hash_used and tonumber(hash_used) > 0 then
    return nil
  end
  return 0
end
