"""The error of a call that found no `sendhost` function library it may load (`sendhost.lua_calls`).

A module of its own because it needs redis at import: `sendhost.lua_calls` is imported by modules that
`sendhost --help` loads, and imports this one only when it raises."""

from __future__ import annotations

from redis.exceptions import ResponseError


class LibraryMissing(ResponseError):
    """Redis holds no library of this release and this client may not load one (a sender host's ACL user).

    A `ResponseError`, so every caller that survives a Redis failure (a fallback lease, `skipped-unavailable`)
    survives this one; its message says what reloads the library."""
