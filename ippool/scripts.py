"""The pool's Lua functions: `ippool/lua/<name>.lua` as the function `ippool_<name>` of the `sendhost` library
(`sendhost.lua_library`), called through one `sendhost.lua_calls.LuaCaller` per client.

On a Redis without Functions (the embedded 6.2) the same files run as scripts, each after the preludes it calls:
the clock shared with warmup (`sendhost/lua/_clock.lua`), `_live.lua` for those that ask whether a slot still has
live leases, `_used.lua` for lease.lua (a slot's used count, legacy field included), and `_place.lua` for the two
that put an address into a slot, so each rule exists in one place. The library carries every prelude once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sendhost import lua_calls, lua_prelude
from sendhost.lua_calls import LuaFunction
from sendhost.lua_prelude import CLOCK

LIVE = ("ippool", "_live")
PLACE = ("ippool", "_place")
USED = ("ippool", "_used")
PRELUDES = {"lease": (CLOCK, USED), "renew": (CLOCK,), "reap": (CLOCK, LIVE), "retire": (CLOCK, LIVE),
            "put_address": (PLACE,), "publish": (PLACE,), "spend": (USED,)}
# A lease's release is no script: it is a plain ZREM of the lease's member (see lease.lua).
NAMES = ("lease", "renew", "reap", "put_address", "publish", "mark_rotating", "abort_rotation", "retire",
         "force_ready", "spend")


def script_text(name: str) -> str:
    """The source of script `name` as it runs without Functions: after the preludes it needs."""
    return lua_prelude.script_source("ippool", name, PRELUDES.get(name, ()))


@dataclass(frozen=True)
class PoolScripts:
    """One `LuaFunction` per Lua file; calling one is one FCALL (one EVALSHA without Functions)."""

    lease: LuaFunction
    renew: LuaFunction
    reap: LuaFunction
    put_address: LuaFunction
    publish: LuaFunction
    mark_rotating: LuaFunction
    abort_rotation: LuaFunction
    retire: LuaFunction
    force_ready: LuaFunction
    spend: LuaFunction

    @classmethod
    def register(cls, client: Any) -> PoolScripts:
        """Every function on `client` (no round trip: the first call checks the library's version)."""
        return cls(**lua_calls.make_functions(client, "ippool", NAMES, PRELUDES))
