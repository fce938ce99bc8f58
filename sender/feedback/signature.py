"""The relay webhook's signature: `X-Sendhost-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">`.

The time is signed with the body, so a captured request stops verifying once `t` is more than the tolerance from
our clock (as Stripe's and Svix's webhooks do); within it, the events' own ids make a replayed request a no-op.
Several `v1=` values may be sent (a relay signing with an old and a new key while rotating): one matching is
enough. The first form, `sha256=<hex HMAC of the body>`, carries no time and so never expires: accepted only
when the service was started with it allowed (`--events-legacy-signatures`), for the release that retires it.
"""

from __future__ import annotations

import hashlib
import hmac

TOLERANCE_S = 300  # 5 minutes either side of our clock: a relay's retry is signed anew, a capture is not
LEGACY_PREFIX = "sha256="
_MAX_T_DIGITS = 12  # unix seconds until the year 33658: a longer number is no time


def sign(key: bytes, body: bytes, t: int) -> str:
    """The header value a relay sends for `body` at unix time `t` (the tests' and the docs' relay)."""
    return f"t={t},v1={_mac(key, str(t).encode() + b'.' + body)}"


def problem(key: bytes, header: str, body: bytes, now: float, *, legacy_allowed: bool = False,
            tolerance_s: int = TOLERANCE_S) -> str | None:
    """Why `header` does not sign `body` at `now` with `key` (one line for the 401 and the log), or None."""
    header = header.strip()
    if not header:
        return "missing X-Sendhost-Signature: send t=<unix seconds>,v1=<hex HMAC-SHA256 of \"<t>.<body>\">"
    if header.startswith(LEGACY_PREFIX):
        if not legacy_allowed:
            return ("the sha256= signature carries no time and is refused; sign t=<unix seconds>,v1=<hex HMAC-SHA256 "
                    "of \"<t>.<body>\"> (or start the service with --events-legacy-signatures for now)")
        return None if _same(header[len(LEGACY_PREFIX):], _mac(key, body)) else "wrong signature"
    t, signatures = _fields(header)
    if t is None or not signatures:
        return "X-Sendhost-Signature is not t=<unix seconds>,v1=<hex>"
    skew = now - int(t)
    if abs(skew) > tolerance_s:
        return (f"the signature's time t={t} is {abs(skew):.0f} s {'behind' if skew > 0 else 'ahead of'} our clock, "
                f"more than {tolerance_s} s: sign each delivery when it is sent, and keep the relay's clock in time")
    expected = _mac(key, t.encode() + b"." + body)
    # every candidate compared, in constant time each: no early exit that a timing could read
    matched = [_same(candidate, expected) for candidate in signatures]
    return None if any(matched) else "wrong signature"


def _fields(header: str) -> tuple[str | None, list[str]]:
    t: str | None = None
    signatures = []
    for part in header.split(","):
        name, sep, value = part.strip().partition("=")
        if not sep:
            return None, []
        if name == "t":
            if t is not None or not value.isascii() or not value.isdigit() or len(value) > _MAX_T_DIGITS:
                return None, []
            t = value
        elif name == "v1":
            signatures.append(value)
        # other schemes (a future v2) are not ours to judge: a relay may send them beside v1
    return t, signatures


def _mac(key: bytes, message: bytes) -> str:
    return hmac.new(key, message, hashlib.sha256).hexdigest()


def _same(candidate: str, expected: str) -> bool:
    return hmac.compare_digest(candidate.strip().lower().encode("utf-8", "replace"), expected.encode())
