"""The guard's Lua scripts: package files loaded by the shared loader (`sendhost.lua_prelude`), registered once per
client."""

from __future__ import annotations

from dataclasses import dataclass

import redis
from redis.commands.core import Script

from sendhost import lua_prelude
from sendhost.lua_prelude import CLOCK

SCRIPT_NAMES = ("reserve", "confirm", "cancel", "successes", "restore")
# GuardScripts that read the clock get the shared clock prelude, so "ARGV[1] or Redis TIME" is written once.
WITH_CLOCK = frozenset({"reserve", "confirm", "cancel", "successes"})


def script_source(name: str) -> str:
    """The source of script `name`, with the clock prelude where it reads the time."""
    return lua_prelude.script_source("warmup", name, (CLOCK,) if name in WITH_CLOCK else ())


@dataclass(frozen=True)
class GuardScripts:
    reserve: Script
    confirm: Script
    cancel: Script
    successes: Script
    restore: Script

    @classmethod
    def register(cls, client: redis.Redis) -> GuardScripts:
        """Register every script on `client` (redis-py loads it on first use and on NOSCRIPT)."""
        return cls(**lua_prelude.register_scripts(client, "warmup", SCRIPT_NAMES,
                                                  {name: (CLOCK,) for name in WITH_CLOCK}))
