"""Reading a stranger's message within fixed bounds, and never raising on what it holds.

Anyone can mail a sending mailbox, so the inbox reader treats every message as hostile: it reads at most
`MAX_BYTES` of it (the IMAP fetch asks for no more), walks at most `MAX_PARTS` MIME parts `MAX_DEPTH` deep, decodes
text with a declared charset only when that charset is a real text encoding (`x-no-such-charset` and `zlib_codec`
read as UTF-8 with replacement, never raise LookupError), and takes at most `MAX_IDS` Message-IDs from any one place.
Headers come back as clean one-line text: no control characters, no lone surrogates (undecodable bytes), so that
anything read here can go into the ledger and onto a terminal.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Iterable
from email.message import Message

# A DSN's parts that say what happened (the human text, the delivery-status, the returned headers) come first; a
# returned message's attachments, which only cost time, come last and are what the cap cuts.
MAX_BYTES = 64 * 1024
MAX_PARTS = 64  # real bounces and reports have 2-4 parts, a reply with attachments a dozen
MAX_DEPTH = 6  # a report whose returned message is itself a report: 3
MAX_IDS = 16  # Message-IDs taken from any one header or text: a References header of a long thread holds ~20
MAX_TEXT = 16 * 1024  # characters of one text part read: what a bounce says is in its first lines
MAX_HEADER = 4096  # characters kept of one header value

# RFC 5322 msg-id, in printable ASCII only (id-left "@" id-right, no angle brackets inside): what is not that is
# no Message-ID of ours, and a NUL or a control character in it would be refused by the ledger.
MESSAGE_ID = re.compile(r"<[!-;=?A-~]{1,250}@[!-;=?A-~]{1,250}>")
_UNCLEAN = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")


class TooComplex(Exception):
    """More parts or deeper nesting than any real bounce, report or reply has."""


# Every level of MIME nesting is a multipart's boundary parameter or a message/* part, and every part of a
# multipart a line with its boundary: both are counted in the raw bytes, before the email package's parser, which
# recurses once per level (2,000 levels cost it a second and a RecursionError) and builds an object per part.
_NESTING = re.compile(rb"boundary\s*\*?\s*=|message/", re.IGNORECASE)
_BOUNDARY = re.compile(rb"""boundary\s*=\s*"?([^"\s;]{1,70})""", re.IGNORECASE)


def check_structure(raw: bytes) -> None:
    """TooComplex when `raw` declares more MIME containers than MAX_PARTS (so it is at most that deep), or has
    more boundary lines than MAX_PARTS parts need."""
    for count, _ in enumerate(_NESTING.finditer(raw), start=1):
        if count > MAX_PARTS:
            raise TooComplex(f"over {MAX_PARTS} MIME containers declared")
    delimiters = sum(raw.count(b"\n--" + boundary) for boundary in set(_BOUNDARY.findall(raw)))
    if delimiters > 2 * MAX_PARTS:  # each part opens with one; each multipart also closes with one
        raise TooComplex(f"over {MAX_PARTS} MIME parts")


def parts(message: Message) -> list[Message]:
    """`message` and its parts, depth first (as Message.walk), or TooComplex past MAX_PARTS or MAX_DEPTH."""
    found: list[Message] = []
    stack: list[tuple[Message, int]] = [(message, 0)]
    while stack:
        part, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise TooComplex(f"MIME parts nested over {MAX_DEPTH} deep")
        found.append(part)
        if len(found) > MAX_PARTS:
            raise TooComplex(f"over {MAX_PARTS} MIME parts")
        payload = part.get_payload()
        if isinstance(payload, list):
            stack.extend((child, depth + 1) for child in reversed(payload) if isinstance(child, Message))
    return found


def trim(message: Message, limit: int = MAX_TEXT) -> None:
    """Cut each text part of `message` to about `limit` characters, at a line end. The bounce detectors test every
    line of every part against dozens of patterns; what a bounce says is in its first lines, and a stranger's
    megabyte of junk lines would otherwise cost them a line-by-line scan."""
    for part in parts(message):
        if part.get_content_maintype() != "text":
            continue
        payload = part.get_payload()
        if isinstance(payload, str) and len(payload) > limit:
            part.set_payload(payload[:limit].rpartition("\n")[0] or payload[:limit])


def charset_of(part: Message) -> str:
    """The part's declared charset when it is a text encoding Python has, else utf-8."""
    declared = part.get_param("charset")
    name = declared[2] if isinstance(declared, tuple) else declared  # RFC 2231: (charset, language, value)
    if not isinstance(name, str):
        return "utf-8"
    try:
        info = codecs.lookup(name.strip().strip('"'))
    except (LookupError, ValueError):
        return "utf-8"
    # bytes-to-bytes codecs (zlib_codec, base64_codec, rot13...) are no text encodings: bytes.decode refuses them
    return info.name if getattr(info, "_is_text_encoding", True) else "utf-8"


def text_of(part: Message, limit: int = MAX_TEXT) -> str:
    """A part's text, at most `limit` characters: a message/* part's header blocks, or its decoded payload."""
    try:
        payload = part.get_payload()
        if isinstance(payload, list):
            return "\n".join(str(p) for p in payload[:MAX_PARTS])[:limit]
        data = part.get_payload(decode=True)
        if isinstance(data, bytes):
            return data[:limit * 4].decode(charset_of(part), "replace")[:limit]
        return str(payload)[:limit]
    except Exception:  # a part the email package cannot render (a header in an unknown charset...): no text
        return ""


def clean(value: object, limit: int = MAX_HEADER) -> str:
    """One line of text fit for the ledger and a terminal: undecodable bytes re-read as UTF-8, controls dropped."""
    text = str(value or "")[:limit]
    if any("\udc80" <= c <= "\udcff" for c in text):  # the email package keeps raw 8-bit header bytes this way
        text = text.encode("ascii", "surrogateescape").decode("utf-8", "replace")
    return " ".join(_UNCLEAN.sub(" ", text).split())


def header(message: Message, name: str) -> str:
    """The first `name` header as clean text ('' when absent or unreadable)."""
    try:
        return clean(message.get(name, ""))
    except Exception:  # a header the email package cannot even turn into text: as good as absent
        return ""


def headers(message: Message, name: str, limit: int = MAX_PARTS) -> list[str]:
    """Every `name` header (at most `limit`), as clean text."""
    try:
        return [clean(value) for value in (message.get_all(name) or [])[:limit]]
    except Exception:
        return []


def message_ids(values: Iterable[str], limit: int = MAX_IDS) -> tuple[str, ...]:
    """The distinct Message-IDs in `values`, in order, at most `limit` of them (linear: a dict keeps them)."""
    found: dict[str, None] = {}
    for value in values:
        for match in MESSAGE_ID.finditer(value):
            found.setdefault(match.group(), None)
            if len(found) >= limit:
                return tuple(found)
    return tuple(found)
