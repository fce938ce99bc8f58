"""The guard's Lua scripts: package files read with importlib.resources and registered once per client."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources

import redis
from redis.commands.core import Script

from sendhost.lua_prelude import clock_prelude

SCRIPT_NAMES = ("reserve", "confirm", "cancel", "successes", "restore")
# Scripts that read the clock get the shared clock prelude, so "ARGV[1] or Redis TIME" is written once.
WITH_CLOCK = frozenset({"reserve", "confirm", "cancel", "successes"})


def _read(name: str) -> str:
    return resources.files("warmup").joinpath("lua", f"{name}.lua").read_text(encoding="utf-8")


def script_source(name: str) -> str:
    """The source of script `name`, with the clock prelude where it reads the time."""
    body = _read(name)
    return clock_prelude() + body if name in WITH_CLOCK else body


@dataclass(frozen=True)
class Scripts:
    reserve: Script
    confirm: Script
    cancel: Script
    successes: Script
    restore: Script

    @classmethod
    def register(cls, client: redis.Redis) -> Scripts:
        """Register every script on `client` (redis-py loads it on first use and on NOSCRIPT)."""
        return cls(**{name: client.register_script(script_source(name)) for name in SCRIPT_NAMES})
