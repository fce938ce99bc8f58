"""Unsubscribe tokens (and tracking's click and open tokens, the same way): the row's random idempotency key and
an HMAC-SHA256 tag over it, URL-safe; the feedback endpoint verifies them.

The key, not the row's id: ids are a sequence, and a ledger restored from an older dump hands the same ids out
again, so a link naming an id would unsubscribe whoever got that id next. The idempotency key is random
(gen_random_uuid()) and never reused. Tokens of the first form (version 7 and before: the row id) are still
read by `verify_row_id_token`, for the transition window the web service documents.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import struct
import uuid

TAG_BYTES = 16  # 128 bits: forging one is out of reach, and the URL stays short
_KEY_BYTES = 16  # a UUID
_TOKEN_CHARS = -(-(_KEY_BYTES + TAG_BYTES) * 4 // 3)  # unpadded base64 of 32 bytes: 43 characters
_KEY_CONTEXT = b"unsubscribe-key:"  # not the row-id form's context: neither form's tag verifies the other
_ROW_ID = struct.Struct(">Q")
_ROW_ID_CONTEXT = b"unsubscribe:"
_ROW_ID_TOKEN_CHARS = -(-(_ROW_ID.size + TAG_BYTES) * 4 // 3)  # 32 characters
# Tracking tokens (docs/tracking.md): the same key, contexts of their own, so that no click or open token
# unsubscribes anyone and no unsubscribe token opens a redirect.
_LINK = struct.Struct(">H")  # the link's index in the step's body
_LINK_CONTEXT = b"click:"
_LINK_TOKEN_CHARS = -(-(_KEY_BYTES + _LINK.size + TAG_BYTES) * 4 // 3)  # 46 characters
_OPEN_CONTEXT = b"open:"


def make_token(key: bytes, idempotency_key: uuid.UUID) -> str:
    payload = idempotency_key.bytes
    return _encode(payload + _tag(key, _KEY_CONTEXT, payload))


def verify_token(key: bytes, token: str) -> uuid.UUID | None:
    """The idempotency key a token names, or None when it was not made with `key` or is not exactly as make_token
    spells it (the decoder skips characters outside the alphabet, so `tok!!!` or `tok ` would otherwise pass)."""
    payload = _signed_payload(key, _KEY_CONTEXT, token, _KEY_BYTES, _TOKEN_CHARS)
    return None if payload is None else uuid.UUID(bytes=payload)


def make_link_token(key: bytes, idempotency_key: uuid.UUID, index: int) -> str:
    """A click token: the row's idempotency key and the index of one link of its body (from 0), tagged."""
    payload = idempotency_key.bytes + _LINK.pack(index)
    return _encode(payload + _tag(key, _LINK_CONTEXT, payload))


def verify_link_token(key: bytes, token: str) -> tuple[uuid.UUID, int] | None:
    """(idempotency key, link index) of a click token made with `key`, in canonical form only."""
    payload = _signed_payload(key, _LINK_CONTEXT, token, _KEY_BYTES + _LINK.size, _LINK_TOKEN_CHARS)
    if payload is None:
        return None
    return uuid.UUID(bytes=payload[:_KEY_BYTES]), int(_LINK.unpack(payload[_KEY_BYTES:])[0])


def make_open_token(key: bytes, idempotency_key: uuid.UUID) -> str:
    """An open token: the row's idempotency key, tagged in a context of its own."""
    payload = idempotency_key.bytes
    return _encode(payload + _tag(key, _OPEN_CONTEXT, payload))


def verify_open_token(key: bytes, token: str) -> uuid.UUID | None:
    payload = _signed_payload(key, _OPEN_CONTEXT, token, _KEY_BYTES, _TOKEN_CHARS)
    return None if payload is None else uuid.UUID(bytes=payload)


def make_row_id_token(key: bytes, email_id: int) -> str:
    """A token of the first form, as the agent made them up to version 7: for tests of the transition window."""
    payload = _ROW_ID.pack(email_id)
    return _encode(payload + _tag(key, _ROW_ID_CONTEXT, payload))


def verify_row_id_token(key: bytes, token: str) -> int | None:
    """The row id a first-form token names (in mail sent before the upgrade), in canonical form only."""
    payload = _signed_payload(key, _ROW_ID_CONTEXT, token, _ROW_ID.size, _ROW_ID_TOKEN_CHARS)
    return None if payload is None else int(_ROW_ID.unpack(payload)[0])


def _signed_payload(key: bytes, context: bytes, token: str, size: int, chars: int) -> bytes | None:
    """The `size` bytes of payload a token of `chars` characters carries, when its tag is theirs under `key` in
    `context` and the token is spelt canonically; else None."""
    raw = _decode(token, chars)
    if raw is None or len(raw) != size + TAG_BYTES:
        return None
    payload, tag = raw[:size], raw[size:]
    return payload if hmac.compare_digest(tag, _tag(key, context, payload)) else None


def _tag(key: bytes, context: bytes, payload: bytes) -> bytes:
    return hmac.new(key, context + payload, hashlib.sha256).digest()[:TAG_BYTES]


def _encode(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _decode(token: str, chars: int) -> bytes | None:
    """The bytes of a token of `chars` characters, only when re-encoding them spells the token again: no padding,
    nothing outside the alphabet, no stray low bits in the last character."""
    if len(token) != chars:
        return None
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
    except (ValueError, TypeError):
        return None
    return raw if _encode(raw) == token else None


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
