"""The pool's Lua scripts, loaded by the shared loader (`sendhost.lua_prelude`) and registered once per client.

PoolScripts that read the time are prefixed with the clock prelude shared with warmup (`sendhost/lua/_clock.lua`),
those that ask whether a slot still has live leases with `_live.lua` too, lease.lua with `_used.lua` (a slot's
used count, legacy field included), and the two that put an address into a
slot with `_place.lua`, so each rule exists in one place.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sendhost import lua_prelude
from sendhost.lua_prelude import CLOCK

LIVE = ("ippool", "_live")
PLACE = ("ippool", "_place")
USED = ("ippool", "_used")
PRELUDES = {"lease": (CLOCK, USED), "renew": (CLOCK,), "reap": (CLOCK, LIVE), "retire": (CLOCK, LIVE),
            "put_address": (PLACE,), "publish": (PLACE,)}
# A lease's release is no script: it is a plain ZREM of the lease's member (see lease.lua).
NAMES = ("lease", "renew", "reap", "put_address", "publish", "mark_rotating", "abort_rotation", "retire",
         "force_ready")


def script_text(name: str) -> str:
    """The source of script `name`, after the preludes it needs."""
    return lua_prelude.script_source("ippool", name, PRELUDES.get(name, ()))


@dataclass(frozen=True)
class PoolScripts:
    """One registered `redis.commands.core.Script` per Lua file; calling one is one EVALSHA."""

    lease: Any
    renew: Any
    reap: Any
    put_address: Any
    publish: Any
    mark_rotating: Any
    abort_rotation: Any
    retire: Any
    force_ready: Any

    @classmethod
    def register(cls, client: Any) -> PoolScripts:
        """Register every script with `client` (no round trip: redis-py loads a script on its first NOSCRIPT)."""
        return cls(**lua_prelude.register_scripts(client, "ippool", NAMES, PRELUDES))
