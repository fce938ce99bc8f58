"""`sendhost dns check-message`: RFC 8058 headers, their DKIM coverage (key from NSD), From alignment."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import dkim
import pytest

from tests.conftest import run_cli
from tests.dns_audit import zones as z
from tests.support.nsd import NsdServer

SIGNED = [b"from", b"to", b"subject", b"list-unsubscribe", b"list-unsubscribe-post"]


def message(*, unsubscribe: str | None = "<https://clean.test/u/1>, <mailto:u@clean.test>",
            post: str | None = "List-Unsubscribe=One-Click", from_domain: str = "clean.test",
            return_path: str = "bounce@clean.test") -> bytes:
    headers = [f"Return-Path: <{return_path}>", f"From: Alice <alice@{from_domain}>", "To: bob@example.test",
               "Subject: hello", "Message-ID: <1@clean.test>"]
    if unsubscribe is not None:
        headers.append(f"List-Unsubscribe: {unsubscribe}")
    if post is not None:
        headers.append(f"List-Unsubscribe-Post: {post}")
    return ("\r\n".join(headers) + "\r\n\r\nHi Bob.\r\n").encode()


def signed(raw: bytes, keys: z.Keys, headers: list[bytes] = SIGNED, domain: bytes = b"clean.test") -> bytes:
    present = [h for h in headers if h.lower() + b":" in raw.lower()]
    signature = dkim.sign(raw, z.SELECTOR.encode(), domain, keys.private_pem, include_headers=present)
    return signature + raw


def check(nsd: NsdServer, tmp_path: Path, raw: bytes, *args: str) -> tuple[int, list[str]]:
    path = tmp_path / "m.eml"
    path.write_bytes(raw)
    result = run_cli("dns", "check-message", str(path), "--nameserver", nsd.address, "--format", "json", *args)
    assert "Traceback" not in result.stderr
    data = json.loads(result.stdout)
    return result.returncode, sorted(f["code"] for f in data["findings"])


def test_signed_one_click_message_passes(nsd: NsdServer, tmp_path: Path, dkim_keys: z.Keys) -> None:
    assert check(nsd, tmp_path, signed(message(), dkim_keys)) == (0, [])


@pytest.mark.parametrize(("kwargs", "expected"), [
    ({"unsubscribe": None, "post": None}, ["message.unsubscribe_missing"]),
    ({"unsubscribe": "<mailto:u@clean.test>"}, ["message.unsubscribe_not_https"]),
    ({"post": None}, ["message.unsubscribe_post_missing"]),
    ({"post": "List-Unsubscribe=Maybe"}, ["message.unsubscribe_post_missing"]),
])
def test_unsubscribe_header_problems(nsd: NsdServer, tmp_path: Path, dkim_keys: z.Keys,
                                     kwargs: dict[str, Any], expected: list[str]) -> None:
    assert check(nsd, tmp_path, signed(message(**kwargs), dkim_keys)) == (1, expected)


def test_unsubscribe_headers_outside_the_signature(nsd: NsdServer, tmp_path: Path, dkim_keys: z.Keys) -> None:
    raw = signed(message(), dkim_keys, headers=[b"from", b"to", b"subject"])
    assert check(nsd, tmp_path, raw) == (1, ["message.unsubscribe_unsigned"])


def test_unsigned_message(nsd: NsdServer, tmp_path: Path) -> None:
    assert check(nsd, tmp_path, message()) == (1, ["message.dkim_missing"])


def test_tampered_message_fails_verification_with_the_key_from_dns(nsd: NsdServer, tmp_path: Path,
                                                                   dkim_keys: z.Keys) -> None:
    raw = signed(message(), dkim_keys).replace(b"Hi Bob.", b"Hi Eve.")
    code, found = check(nsd, tmp_path, raw)
    assert code == 1
    assert "message.dkim_invalid" in found


def test_from_aligned_with_neither_dkim_nor_return_path(nsd: NsdServer, tmp_path: Path, dkim_keys: z.Keys) -> None:
    raw = signed(message(from_domain="listed.test", return_path="b@bounce.shared.test"), dkim_keys)
    assert check(nsd, tmp_path, raw) == (1, ["message.alignment"])
