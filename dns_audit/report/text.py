"""Text from DNS answers and messages made safe for a terminal: no control characters (ESC sequences in a TXT
record must not reach the user's terminal), shown as visible escapes instead."""

from __future__ import annotations

import re

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """`text` with every control character but newline and tab written as a visible `\\xNN` escape."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group(0)):02x}", text)
