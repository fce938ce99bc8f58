"""The pool's Lua scripts: read from package files once, registered once per client.

Scripts that reap expired leases (`lease`, `reap`) are prefixed with the shared `_reap.lua` prelude, so the
reaping rule exists in one place.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

PRELUDE = "_reap.lua"
WITH_PRELUDE = frozenset({"lease", "reap"})
NAMES = ("lease", "release", "renew", "reap", "put_address", "publish", "mark_rotating", "abort_rotation",
         "retire", "set_used", "force_ready")


@cache
def script_text(name: str) -> str:
    """The source of script `name` (with the reaping prelude where it needs it)."""
    folder = resources.files("ippool") / "lua"
    body = (folder / f"{name}.lua").read_text(encoding="utf-8")
    if name in WITH_PRELUDE:
        return (folder / PRELUDE).read_text(encoding="utf-8") + body
    return body


@dataclass(frozen=True)
class Scripts:
    """One registered `redis.commands.core.Script` per Lua file; calling one is one EVALSHA."""

    lease: Any
    release: Any
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
