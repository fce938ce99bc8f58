"""`sendhost dns check-message`: RFC 8058 headers, their DKIM coverage (key from NSD), From alignment."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import dkim
import pytest

from tests.conftest import run_cli
from tests.dns_audit import zones as z
from tests.dns_audit.conftest import zone_dir_from
from tests.support.nsd import NsdServer

SIGNED = [b"from", b"to", b"subject", b"list-unsubscribe", b"list-unsubscribe-post"]


BODY = "Hi Bob.\r\n\r\nUnsubscribe: https://clean.test/u/1\r\n"


def message(*, unsubscribe: str | None = "<https://clean.test/u/1>, <mailto:u@clean.test>",
            post: str | None = "List-Unsubscribe=One-Click", from_domain: str = "clean.test",
            return_path: str = "bounce@clean.test", body: str = BODY, subject: str = "hello",
            extra: tuple[str, ...] = ()) -> bytes:
    headers = [f"Return-Path: <{return_path}>", f"From: Alice <alice@{from_domain}>", "To: bob@example.test",
               f"Subject: {subject}", "Message-ID: <1@clean.test>", *extra]
    if unsubscribe is not None:
        headers.append(f"List-Unsubscribe: {unsubscribe}")
    if post is not None:
        headers.append(f"List-Unsubscribe-Post: {post}")
    return ("\r\n".join(headers) + "\r\n\r\n" + body).encode()


def signed(raw: bytes, keys: z.Keys, headers: list[bytes] = SIGNED, domain: bytes = b"clean.test") -> bytes:
    present = [h for h in headers if h.lower() + b":" in raw.lower()]
    signature = dkim.sign(raw, z.SELECTOR.encode(), domain, keys.private_pem, include_headers=present)
    return signature + raw


def check(nsd: NsdServer, tmp_path: Path, raw: bytes, *args: str) -> tuple[int, list[str]]:
    path = tmp_path / "m.eml"
    path.write_bytes(raw)
    result = run_cli("dns", "check-message", str(path), "--nameserver", nsd.address, "--format", "json", *args)
    assert "Traceback" not in result.stderr
    assert len(result.stderr.splitlines()) == (1 if result.returncode else 0), result.stderr  # no library logs
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


def test_a_selector_with_no_key_is_key_missing_not_a_bad_signature(nsd: NsdServer, tmp_path: Path,
                                                                   dkim_keys: z.Keys) -> None:
    raw = signed(message(from_domain="dkim-missing.test", return_path="b@dkim-missing.test"), dkim_keys,
                 domain=b"dkim-missing.test")
    path = tmp_path / "m.eml"
    path.write_bytes(raw)
    result = run_cli("dns", "check-message", str(path), "--nameserver", nsd.address, "--format", "json")
    codes = [f["code"] for f in json.loads(result.stdout)["findings"]]
    assert "message.dkim_key_missing" in codes and "message.dkim_invalid" not in codes
    assert result.stderr.splitlines() == ["error: 1 finding(s) at or above error in " + str(path)]  # no log lines


@pytest.mark.service
def test_an_unanswered_nameserver_is_exit_2(tmp_path: Path, dkim_keys: z.Keys) -> None:
    from tests.support.dns_faults import blackhole

    path = tmp_path / "m.eml"
    path.write_bytes(signed(message(), dkim_keys))
    with blackhole() as address:
        result = run_cli("dns", "check-message", str(path), "--nameserver", address, "--timeout", "0.2")
    assert result.returncode == 2
    assert result.stderr.startswith(f"error: no answer from nameserver {address}")


def test_a_file_that_is_not_a_message_is_exit_2(tmp_path: Path) -> None:
    path = tmp_path / "picture.eml"
    path.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    result = run_cli("dns", "check-message", str(path), "--nameserver", "127.0.0.1:9")
    assert result.returncode == 2
    assert result.stderr.startswith(f"error: {path} is not a message")
    assert result.stdout == ""


def test_an_unsubscribe_url_without_angle_brackets_is_accepted_with_a_warning(nsd: NsdServer, tmp_path: Path,
                                                                             dkim_keys: z.Keys) -> None:
    raw = signed(message(unsubscribe="https://clean.test/u/1"), dkim_keys)
    assert check(nsd, tmp_path, raw) == (0, ["message.unsubscribe_no_brackets"])


def test_zone_dir_resolves_offline(nsd: NsdServer, tmp_path: Path, dkim_keys: z.Keys) -> None:
    zones = zone_dir_from(nsd, tmp_path, ["clean.test"])
    path = tmp_path / "m.eml"
    path.write_bytes(signed(message(), dkim_keys))
    result = run_cli("dns", "check-message", str(path), "--zone-dir", str(zones), "--format", "json")
    assert result.returncode == 0, result.stdout + result.stderr
    assert json.loads(result.stdout)["findings"] == []


@pytest.mark.parametrize(("body", "extra", "expected"), [
    ("Hi Bob.\r\n", (), ["message.unsubscribe_link_missing"]),
    ("Hi Bob, see https://clean.test/offer\r\n", (), ["message.unsubscribe_link_missing"]),
    ("Hi Bob.\r\nNo more mail: https://clean.test/u/1\r\n", (), []),  # the List-Unsubscribe URL itself
    ('<p>Hi Bob.</p><a href="https://clean.test/u/1">Unsubscribe</a>', ("Content-Type: text/html",), []),
    ("<p>Hi Bob.</p><p>https://clean.test/offer</p>", ("Content-Type: text/html",),
     ["message.unsubscribe_link_missing"]),
])
def test_a_visible_unsubscribe_link_in_the_body(nsd: NsdServer, tmp_path: Path, dkim_keys: z.Keys, body: str,
                                                extra: tuple[str, ...], expected: list[str]) -> None:
    raw = signed(message(body=body, extra=extra), dkim_keys)
    assert check(nsd, tmp_path, raw) == (1 if expected else 0, expected)


def test_a_multipart_message_needs_the_link_in_both_parts(nsd: NsdServer, tmp_path: Path, dkim_keys: z.Keys) -> None:
    body = ("--b\r\nContent-Type: text/plain\r\n\r\nUnsubscribe: https://clean.test/u/1\r\n"
            "--b\r\nContent-Type: text/html\r\n\r\n<p>Hi</p>\r\n--b--\r\n")
    raw = signed(message(body=body, extra=("MIME-Version: 1.0", 'Content-Type: multipart/alternative; boundary="b"')),
                 dkim_keys)
    path = tmp_path / "m.eml"
    path.write_bytes(raw)
    result = run_cli("dns", "check-message", str(path), "--nameserver", nsd.address, "--format", "json")
    [found] = json.loads(result.stdout)["findings"]
    assert (found["code"], found["subject"]) == ("message.unsubscribe_link_missing", "text/html")


def test_markup_and_control_characters_in_a_message_print_as_text(nsd: NsdServer, tmp_path: Path,
                                                                  dkim_keys: z.Keys) -> None:
    # the selector reaches the finding's message: `[/]` is rich markup, ESC starts a terminal sequence
    raw = message(extra=("DKIM-Signature: v=1; a=rsa-sha256; d=clean.test; s=[/]\x1b[31m; h=from; bh=x; b=y",))
    path = tmp_path / "m.eml"
    path.write_bytes(raw)
    result = run_cli("dns", "check-message", str(path), "--nameserver", nsd.address, "--format", "table")
    assert result.returncode == 1
    assert "MarkupError" not in result.stderr and "Traceback" not in result.stderr
    assert "\x1b" not in result.stdout
    assert "[/]" in result.stdout and "\\x1b" in result.stdout  # shown as text, the escape made visible
