"""The pool's Lua scripts: read from package files once, registered once per client.

Scripts that read the time are prefixed with the clock prelude shared with warmup (`sendhost/lua/_clock.lua`),
those that ask whether a slot still has live leases with `_live.lua` too, and the two that put an address into a
slot with `_place.lua`, so each rule exists in one place.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from sendhost.lua_prelude import clock_prelude

PRELUDES = {"lease": ("clock",), "renew": ("clock",), "reap": ("clock", "live"), "retire": ("clock", "live"),
            "set_used": ("clock", "live"), "put_address": ("place",), "publish": ("place",)}
# A lease's release is no script: it is a plain ZREM of the lease's member (see lease.lua).
NAMES = ("lease", "renew", "reap", "put_address", "publish", "mark_rotating", "abort_rotation",
         "retire", "set_used", "force_ready")


@cache
def script_text(name: str) -> str:
    """The source of script `name`, after the preludes it needs."""
    sources = {"clock": clock_prelude(), "live": _read("_live"), "place": _read("_place")}
    return "".join(sources[prelude] for prelude in PRELUDES.get(name, ())) + _read(name)


def _read(name: str) -> str:
    return (resources.files("ippool") / "lua" / f"{name}.lua").read_text(encoding="utf-8")


@dataclass(frozen=True)
class Scripts:
    """One registered `redis.commands.core.Script` per Lua file; calling one is one EVALSHA."""

    lease: Any
    renew: Any
    reap: Any
    put_address: Any
    publish: Any
    mark_rotating: Any
    abort_rotation: Any
    retire: Any
    set_used: Any
    force_ready: Any

    @classmethod
    def register(cls, client: Any) -> Scripts:
        """Register every script with `client` (no round trip: redis-py loads a script on its first NOSCRIPT)."""
        return cls(**{name: client.register_script(script_text(name)) for name in NAMES})
