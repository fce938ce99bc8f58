"""Lua that the scripts of several packages share, kept in one file: the clock."""

from __future__ import annotations

from functools import cache
from importlib import resources


@cache
def clock_prelude() -> str:
    """`now_ms(arg)` for a script that reads the time: the caller's clock in ms, or Redis TIME when arg is ""."""
    return resources.files("sendhost").joinpath("lua", "_clock.lua").read_text(encoding="utf-8")
