"""Unsubscribe tokens: the row's id and an HMAC-SHA256 tag over it, URL-safe; the feedback endpoint verifies them."""

from __future__ import annotations

import base64
import hashlib
import hmac
import struct

TAG_BYTES = 16  # 128 bits: forging one is out of reach, and the URL stays short
_ID = struct.Struct(">Q")
_TOKEN_CHARS = -(-(_ID.size + TAG_BYTES) * 4 // 3)  # unpadded base64 of 24 bytes: 32 characters


def make_token(key: bytes, email_id: int) -> str:
    payload = _ID.pack(email_id)
    tag = hmac.new(key, b"unsubscribe:" + payload, hashlib.sha256).digest()[:TAG_BYTES]
    return _encode(payload + tag)


def _encode(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def verify_token(key: bytes, token: str) -> int | None:
    """The row id a token names, or None when it was not made with `key`, or is not exactly as make_token spells it
    (the decoder skips characters outside the alphabet, so `tok!!!` or `tok ` would otherwise pass as `tok`)."""
    if len(token) != _TOKEN_CHARS:
        return None
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
    except (ValueError, TypeError):
        return None
    if len(raw) != _ID.size + TAG_BYTES or _encode(raw) != token:
        return None
    payload, tag = raw[:_ID.size], raw[_ID.size:]
    expected = hmac.new(key, b"unsubscribe:" + payload, hashlib.sha256).digest()[:TAG_BYTES]
    if not hmac.compare_digest(tag, expected):
        return None
    return int(_ID.unpack(payload)[0])


def read_key_file(path: str) -> bytes:
    """A key file holds at least 32 bytes of key material (raw, or hex text)."""
    from sender.errors import SenderConfigError

    try:
        data = open(path, "rb").read().strip()  # noqa: SIM115 - one read, closed by refcount at once
    except OSError as exc:
        raise SenderConfigError(f"unsubscribe key file {path}: {exc.strerror}; fix sendhost_unsubscribe_key_file "
                                "or remove it to keep the key in the ledger") from None
    try:
        key = bytes.fromhex(data.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        key = data
    if len(key) < 32:
        raise SenderConfigError(f"unsubscribe key file {path} holds {len(key)} bytes; write at least 32 "
                                "(e.g. `openssl rand -hex 32`)")
    return key
