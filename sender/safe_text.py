"""What text the agent can put in a header, and what text can reach a terminal, checked where it enters.

A CR or LF in a header value would end the header (or, folded by the email package, fail the message after the
attempt started, leaving the row `unconfirmed` though nothing left); a NUL is refused by submission servers and by
PostgreSQL; an ESC or a C1 control starts a terminal escape sequence when `status` or `lead show` prints the value.
So importers refuse them, with the file and line, before anything is queued.

Header text also holds no RFC 2047 encoded-word syntax (`=?charset?q?...?=`): the email package decodes encoded words
in a value it is given, and CPython before the CVE-2024-6923 fix (3.11.7, for one) writes what they decode to, CR
and LF included, so `=?utf-8?q?x=0D=0AReply-To:_evil@x?=` became a Reply-To header. A merge value is data; refusing
the syntax keeps it data on every Python the project runs on.
"""

from __future__ import annotations

import re

# C0 controls but TAB, DEL, C1 controls (U+009B is a one-character CSI) and the Unicode line/paragraph separators.
_HEADER_BAD = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029]")
# Message text may break lines; everything else above stays refused.
_TEXT_BAD = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")
# The start and the end of an encoded word, however lenient the decoder is about what comes between.
_ENCODED_WORD = re.compile(r"=\?.*\?=")
_NAMES = {"\r": "a carriage return (CR)", "\n": "a line feed (LF)", "\x00": "a NUL", "\x1b": "an escape (ESC)",
          "\x9b": "a terminal control sequence introducer (CSI)"}


def header_problem(value: str) -> str | None:
    """What makes `value` unfit for a header line (a subject, an id), or None: one line, no control characters,
    no encoded-word syntax."""
    if problem := _problem(_HEADER_BAD, value):
        return problem
    if word := _ENCODED_WORD.search(value):
        return (f"holds encoded-word syntax ('=?...?=') at character {word.start() + 1}, which a mail reader decodes "
                "into other text; write the text itself")
    return None


def text_problem(value: str) -> str | None:
    """What makes `value` unfit for a message body shown on a terminal, or None: line breaks and tabs are fine."""
    return _problem(_TEXT_BAD, value)


def _problem(pattern: re.Pattern[str], value: str) -> str | None:
    bad = pattern.search(value)
    if bad is None:
        return None
    char = bad.group()
    name = _NAMES.get(char, f"the control character {char!r}")
    return f"holds {name} at character {bad.start() + 1}"
