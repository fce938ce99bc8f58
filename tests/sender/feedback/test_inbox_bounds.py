"""What the inbox reader's parser makes of hostile messages, without services: it never raises, each message costs
a bounded amount of work (IDs capped and deduplicated, bytes and parts bounded), and a bad charset or 8-bit header
does not keep a real bounce or reply from being read."""

from __future__ import annotations

import email

import pytest

from sender.feedback import mime
from sender.feedback.bounces import MessageKind, parse
from tests.sender import inbox_samples as samples

OURS = "<ours-1@sender.example>"
LEAD = "lead@rcpt.example"


@pytest.mark.parametrize("charset", ["x-no-such-charset", "zlib_codec", "base64_codec", "rot13", "utf-16"])
def test_a_bounce_in_a_charset_python_cannot_decode_is_still_a_bounce(charset: str) -> None:
    parsed = parse(samples.charset_dsn(charset)(OURS, LEAD))
    assert (parsed.kind, parsed.about, parsed.recipients) == (MessageKind.HARD_BOUNCE, (OURS,), frozenset({LEAD}))


@pytest.mark.parametrize("sample", [samples.huge_dsn, samples.many_parts, samples.deep_nesting,
                                    samples.broken_mime], ids=["huge", "parts", "deep", "broken"])
def test_what_no_real_bounce_looks_like_is_malformed(sample: samples.Sample) -> None:
    assert parse(sample(OURS, LEAD)).kind is MessageKind.MALFORMED


def test_message_ids_are_capped_and_deduplicated_in_order() -> None:
    parsed = parse(samples.many_ids_dsn(OURS, LEAD))
    assert len(parsed.quoted) == mime.MAX_IDS and OURS not in parsed.quoted  # ours is the 40,001st
    assert parsed.quoted[:2] == ("<junk0@elsewhere.example>", "<junk1@elsewhere.example>")
    repeated = " ".join(["<a@x.example>", "<b@x.example>"] * 10_000)
    assert mime.message_ids([repeated]) == ("<a@x.example>", "<b@x.example>")


def test_only_the_first_bytes_are_read() -> None:
    # a real DSN whose returned message carries a large attachment: its reports come first, and are read
    raw = samples.gmail_hard(OURS, LEAD).replace(b"Hi lead\r\n", (b"A" * 76 + b"\r\n") * 20_000)
    assert len(raw) > mime.MAX_BYTES
    parsed = parse(raw)
    assert (parsed.kind, parsed.about) == (MessageKind.HARD_BOUNCE, (OURS,))


def test_control_characters_and_8bit_headers_never_reach_the_ledger() -> None:
    parsed = parse(samples.nul_ids(OURS, LEAD))
    assert parsed.sender == "" and parsed.about == () and parsed.own_message_id is None
    assert all(ord(c) >= 32 for c in parsed.detail)


def test_a_reply_with_raw_utf8_in_its_from_is_a_reply() -> None:
    raw = samples.reply(OURS, LEAD).replace(b"From: Lead <", "From: Zoë Löwe <".encode())
    parsed = parse(raw)
    assert (parsed.kind, parsed.sender, parsed.about) == (MessageKind.REPLY, LEAD, (OURS,))


def test_an_rfc2231_report_type_is_read() -> None:
    parsed = parse(samples.rfc2231_report(OURS, LEAD))
    assert (parsed.kind, parsed.recipients) == (MessageKind.HARD_BOUNCE, frozenset({"someone@elsewhere.example"}))


def test_a_dsn_naming_no_recipient_says_so() -> None:
    parsed = parse(samples.no_recipient_bounce(OURS, LEAD))
    assert (parsed.kind, parsed.about, parsed.recipients) == (MessageKind.HARD_BOUNCE, (OURS,), frozenset())


def test_the_charset_of_a_part_is_a_text_encoding_or_utf8() -> None:
    for declared, used in (("zlib_codec", "utf-8"), ("x-no-such-charset", "utf-8"), ("latin-1", "iso8859-1"),
                           ('"utf-8"', "utf-8")):
        part = email.message_from_string(f"Content-Type: text/plain; charset={declared}\r\n\r\nx")
        assert mime.charset_of(part) == used
