"""The Redis Functions library `sendhost`: every Lua file of ippool and warmup as one function, loaded by an admin.

A sender host's ACL user may call functions (FCALL) but neither run a script of its own (EVAL, EVALSHA, SCRIPT)
nor load one (FUNCTION): only code the admin installed runs for it (docs/security.md#the-senders-redis-user).

One library for both packages, not one each: the clock prelude they share is carried once, one FUNCTION LOAD
installs (or replaces) everything a sender calls, and one version says whether a Redis holds the code of this
release. The library is built from the packages' `lua/` folders: each `<name>.lua` becomes the function
`<package>_<name>` (its body wrapped as `function(KEYS, ARGV)`, so the file reads as the script it always was),
each `_<name>.lua` is a prelude defined once at the top, after the shared clock (`sendhost/lua/_clock.lua`).
`sendhost_version` (no-writes, so FCALL_RO may call it) returns the library's version: the API number and a digest
of its source, so any change to any file makes a new version, which `FUNCTION LOAD REPLACE` puts in place of the old.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cache
from importlib import resources

from sendhost.lua_prelude import CLOCK, read_lua

LIBRARY = "sendhost"
# Raised when a function's KEYS/ARGV contract changes in a way an older caller would misread.
API_VERSION = 1
# The packages whose `lua/` folders make up the library, in load order.
PACKAGES = ("ippool", "warmup")
VERSION_FUNCTION = "sendhost_version"


@dataclass(frozen=True)
class LuaFile:
    """One Lua file of a package: a function (`name`) or, when its stem starts with `_`, a prelude."""

    package: str
    stem: str

    @property
    def is_prelude(self) -> bool:
        return self.stem.startswith("_")

    @property
    def function_name(self) -> str:
        """The function's name on Redis: function names are server-wide, so the package prefixes them."""
        return f"{self.package}_{self.stem}"


@cache
def function_name(package: str, name: str) -> str:
    """The Redis function that runs `<package>/lua/<name>.lua`."""
    return LuaFile(package, name).function_name


@cache
def lua_files(package: str) -> tuple[LuaFile, ...]:
    """The Lua files of `package`, preludes and functions, sorted by name."""
    folder = resources.files(package).joinpath("lua")
    return tuple(LuaFile(package, entry.name[:-4]) for entry in sorted(folder.iterdir(), key=lambda e: e.name)
                 if entry.name.endswith(".lua"))


def functions() -> tuple[LuaFile, ...]:
    """Every function of the library (the version function aside)."""
    return tuple(f for package in PACKAGES for f in lua_files(package) if not f.is_prelude)


def _body() -> str:
    parts = [f"-- {LIBRARY}: the Lua of {', '.join(PACKAGES)} as Redis functions (sendhost/lua_library.py).\n",
             read_lua(*CLOCK)]
    parts += [read_lua(f.package, f.stem) for package in PACKAGES for f in lua_files(package) if f.is_prelude]
    for f in functions():
        # The file's own text, unchanged, as the function's body: its header still documents KEYS and ARGV.
        parts.append(f"\nlocal function {f.function_name}(KEYS, ARGV)\n{read_lua(f.package, f.stem)}\nend\n"
                     f"redis.register_function('{f.function_name}', {f.function_name})\n")
    return "".join(parts)


@cache
def library_version() -> str:
    """This release's library version: `<API>:<first 12 hex digits of the SHA-1 of the library's code>`."""
    return f"{API_VERSION}:{hashlib.sha1(_body().encode(), usedforsecurity=False).hexdigest()[:12]}"


@cache
def library_source() -> str:
    """The text `FUNCTION LOAD` takes: the shebang naming the library, the preludes once, every function, and
    `sendhost_version`."""
    return (f"#!lua name={LIBRARY}\n{_body()}\n"
            f"redis.register_function{{function_name='{VERSION_FUNCTION}', "
            f"callback=function() return '{library_version()}' end, flags={{'no-writes'}}}}\n")
