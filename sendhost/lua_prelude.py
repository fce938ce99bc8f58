"""The one Lua reader of ippool and warmup: a script is its package's `lua/<name>.lua`, after the preludes it needs
(as it runs without Functions; `sendhost.lua_library` builds the Functions library from the same files).

A prelude is a shared piece of Lua that a script calls but that is never registered alone: the clock
(`sendhost/lua/_clock.lua`, shared by ippool and warmup) or a package's own `lua/_<name>.lua`. Sources are read with
`importlib.resources`, once per process.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache
from importlib import resources

# The clock prelude, as a (package, file stem) pair: `now_ms(arg)` is the caller's clock in ms, or Redis TIME.
CLOCK = ("sendhost", "_clock")


@cache
def read_lua(package: str, stem: str) -> str:
    """The text of `<package>/lua/<stem>.lua`."""
    return resources.files(package).joinpath("lua", f"{stem}.lua").read_text(encoding="utf-8")


def clock_prelude() -> str:
    """`now_ms(arg)` for a script that reads the time: the caller's clock in ms, or Redis TIME when arg is ""."""
    return read_lua(*CLOCK)


def script_source(package: str, name: str, preludes: Iterable[tuple[str, str]] = ()) -> str:
    """The source of script `name` of `package`, after each prelude (a (package, file stem) pair), in order."""
    return "".join(read_lua(*prelude) for prelude in preludes) + read_lua(package, name)

