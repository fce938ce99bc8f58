"""The guard's Lua functions: `warmup/lua/<name>.lua` as the function `warmup_<name>` of the `sendhost` library
(`sendhost.lua_library`), called through one `sendhost.lua_calls.LuaCaller` per client; on a Redis without
Functions, the same files as scripts, after the clock prelude where they read the time."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sendhost import lua_calls, lua_prelude
from sendhost.lua_calls import LuaFunction
from sendhost.lua_prelude import CLOCK

SCRIPT_NAMES = ("reserve", "confirm", "cancel", "successes", "restore", "restore_campaign")
DAY_COUNT = ("warmup", "_day_count")
# Those that read the clock get the shared clock prelude, so "ARGV[1] or Redis TIME" is written once; the restores
# share how a two-day counter is raised.
PRELUDES = {**{name: (CLOCK,) for name in ("reserve", "confirm", "cancel", "successes")},
            "restore": (DAY_COUNT,), "restore_campaign": (DAY_COUNT,)}


def script_source(name: str) -> str:
    """The source of script `name` as it runs without Functions: after the preludes it needs."""
    return lua_prelude.script_source("warmup", name, PRELUDES.get(name, ()))


@dataclass(frozen=True)
class GuardScripts:
    reserve: LuaFunction
    confirm: LuaFunction
    cancel: LuaFunction
    successes: LuaFunction
    restore: LuaFunction
    restore_campaign: LuaFunction

    @classmethod
    def register(cls, client: Any) -> GuardScripts:
        """Every function on `client` (no round trip: the first call checks the library's version)."""
        return cls(**lua_calls.make_functions(client, "warmup", SCRIPT_NAMES, PRELUDES))

    def call_all(self, calls: list[tuple[LuaFunction, list[Any], list[Any]]]) -> list[Any]:
        """Several calls in one round trip where the client can pipeline them."""
        return self.reserve.caller.call_all(calls)
