"""Durations as people write them in a campaign file: `3d`, `4h`, `30m`, `90s`, or combined, largest unit first."""

from __future__ import annotations

import re

from sender.errors import SenderConfigError

UNITS = {"d": 86_400, "h": 3_600, "m": 60, "s": 1}
# Each unit at most once, largest first (`1d12h`, not `12h1d`), digits before each; nothing else, no spaces.
_DURATION_RE = re.compile(r"(?:(\d{1,6})d)?(?:(\d{1,6})h)?(?:(\d{1,7})m)?(?:(\d{1,9})s)?\Z", re.ASCII)
EXAMPLES = "like 0s, 90s, 30m, 4h, 3d or 1d12h"


class DurationError(SenderConfigError):
    """Text that is not a duration. Exit 2."""


def parse_duration(text: object) -> int:
    """Whole seconds of `text` (`3d` -> 259200), or DurationError saying what a duration looks like."""
    if isinstance(text, bool) or not isinstance(text, str):
        hint = f"; write {text}s for seconds" if isinstance(text, int) and not isinstance(text, bool) else ""
        raise DurationError(f"{text!r} is not a duration {EXAMPLES}{hint}")
    match = _DURATION_RE.match(text)
    if not text or match is None:
        raise DurationError(f"{text!r} is not a duration {EXAMPLES} (units d, h, m, s, largest first, no spaces)")
    return sum(int(amount) * seconds for amount, seconds in zip(match.groups(), UNITS.values(), strict=True)
               if amount is not None)


def format_duration(seconds: int) -> str:
    """The shortest text `parse_duration` reads back as `seconds` (`0s`, `90s` -> `1m30s`, `259200` -> `3d`)."""
    if seconds < 0:
        raise ValueError(f"a duration is never negative: {seconds}")
    parts = []
    for unit, size in UNITS.items():
        amount, seconds = divmod(seconds, size)
        if amount:
            parts.append(f"{amount}{unit}")
    return "".join(parts) or "0s"
