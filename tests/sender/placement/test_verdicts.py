"""The receiver's verdicts on a placement message: only its Authentication-Results under the seed's authserv-id are
read (the topmost of those), each method's result, and the DKIM result of the signature aligned with the From."""

from __future__ import annotations

from email.message import Message

from sender.placement.verdicts import Verdicts, aligned, read_verdicts


def message(*results: str) -> Message:
    msg = Message()
    for value in results:
        msg["Authentication-Results"] = value
    return msg


def test_one_header_per_checker_is_merged_topmost_first() -> None:
    got = read_verdicts(message(
        "mx.test; dmarc=pass (p=quarantine dis=none) header.from=sender.example",
        "mx.test; dkim=fail reason=\"key not found in DNS\" header.d=sender.example header.s=gone; dkim-atps=neutral",
        "mx.test; spf=pass (sender SPF authorized) smtp.mailfrom=sender.example",
        "mx.test; spf=fail; dkim=pass header.d=sender.example; dmarc=fail"), "mx.test", "sender.example")
    assert (got.spf, got.dkim, got.dkim_domain, got.dmarc, got.arc) == ("pass", "fail", "sender.example", "pass",
                                                                       "none")
    assert got.header is not None and len(got.header.splitlines()) == 4


def test_only_the_trusted_id_is_read_and_its_topmost_header() -> None:
    got = read_verdicts(message(
        "forger.example; spf=pass; dkim=pass header.d=sender.example; dmarc=pass header.from=sender.example",
        "MX.test; spf=softfail smtp.mailfrom=sender.example; dkim=fail header.d=sender.example; "
        "dmarc=fail header.from=sender.example; arc=pass",
        "mx.test; spf=pass; dkim=pass header.d=sender.example; dmarc=pass"), "mx.test", "sender.example")
    assert (got.spf, got.dkim, got.dkim_domain, got.dmarc, got.arc) == (
        "softfail", "fail", "sender.example", "fail", "pass")
    assert got.header is not None and got.header.startswith("MX.test; spf=softfail")
    assert "forger" not in got.header


def test_the_aligned_signature_is_the_one_read() -> None:
    got = read_verdicts(message("mx.test; dkim=pass header.d=esp.example; dkim=fail header.d=mail.sender.example"),
                        "mx.test", "sender.example")
    assert (got.dkim, got.dkim_domain) == ("fail", "mail.sender.example")
    only_other = read_verdicts(message("mx.test; dkim=pass header.d=esp.example"), "mx.test", "sender.example")
    assert (only_other.dkim, only_other.dkim_domain) == ("pass", "esp.example")


def test_no_trusted_id_or_no_header_under_it_is_none() -> None:
    msg = message("forger.example; spf=pass; dkim=pass header.d=sender.example; dmarc=pass")
    assert read_verdicts(msg, None, "sender.example") == Verdicts()
    assert read_verdicts(msg, "mx.test", "sender.example") == Verdicts()
    assert read_verdicts(message("mx.test; this is not ( a header"), "mx.test", "sender.example") == Verdicts()


def test_alignment_is_relaxed() -> None:
    assert aligned("sender.example", "sender.example") and aligned("mail.sender.example", "sender.example")
    assert not aligned("esp.example", "sender.example") and not aligned("notsender.example", "sender.example")
