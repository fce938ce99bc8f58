"""The guard's Lua scripts: package files read with importlib.resources and registered once per client."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources

import redis
from redis.commands.core import Script

SCRIPT_NAMES = ("reserve", "confirm", "cancel", "successes", "restore")


def script_source(name: str) -> str:
    return resources.files("warmup").joinpath("lua", f"{name}.lua").read_text(encoding="utf-8")


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
