"""The provider's DMARC verdict on a From (sender.feedback.authentication): believed only under its authserv-id,
a fail anywhere under it wins, a pass only from the topmost header, results about other domains and headers off
the RFC 8601 grammar are ignored. Pure: no services."""

from __future__ import annotations

import email

import pytest

from sender.feedback.authentication import dmarc_verdict
from sender.ledger.events import Verdict

ID = "mx.google.com"
GMAIL_PASS = ("mx.google.com; dkim=pass header.i=@rcpt.example header.s=s1 header.b=AbCd; spf=pass (google.com: "
              "domain of lead@rcpt.example designates 192.0.2.1 as permitted sender) smtp.mailfrom=lead@rcpt.example;"
              " dmarc=pass (p=REJECT sp=REJECT dis=NONE) header.from=rcpt.example")
GMAIL_FAIL = ("mx.google.com; dkim=fail header.i=@rcpt.example; spf=fail smtp.mailfrom=lead@rcpt.example; "
              "dmarc=fail (p=REJECT sp=REJECT dis=REJECT) header.from=rcpt.example")
MICROSOFT = ("spf=pass (sender IP is 192.0.2.1) smtp.mailfrom=rcpt.example; dkim=pass (signature was verified) "
             "header.d=rcpt.example;dmarc=fail action=none header.from=rcpt.example;compauth=pass reason=100")


def _message(*results: str) -> email.message.Message:
    head = "".join(f"Authentication-Results: {r}\r\n" for r in results)
    return email.message_from_string(head + "From: Lead <lead@rcpt.example>\r\nSubject: Re: Hi\r\n\r\nok\r\n")


@pytest.mark.parametrize(("results", "expected"), [
    ((GMAIL_PASS,), Verdict.PASS),
    ((GMAIL_FAIL,), Verdict.FAIL),
    (("mx.google.com; dmarc=none header.from=rcpt.example",), Verdict.NONE),  # the domain publishes no policy
    (("mx.google.com; dmarc=temperror header.from=rcpt.example",), Verdict.NONE),
    (("mx.google.com; none",), Verdict.NONE),
    (("MX.Google.COM; dmarc=fail header.from=RCPT.example",), Verdict.FAIL),  # ids and domains are caseless
    ((GMAIL_PASS, GMAIL_FAIL), Verdict.FAIL),  # a fail the provider wrote below its pass still counts
    ((GMAIL_FAIL, GMAIL_PASS), Verdict.FAIL),  # a pass the sender planted below the provider's fail: ignored
    (("mx.google.com; spf=pass smtp.mailfrom=x", GMAIL_PASS), Verdict.NONE),  # a pass only from the topmost
    (("evil.example; dmarc=fail header.from=rcpt.example",), Verdict.NONE),  # another id: the sender's say-so
    (("evil.example; dmarc=pass header.from=rcpt.example",), Verdict.NONE),
    (("mx.google.com; dmarc=fail header.from=elsewhere.example",), Verdict.NONE),  # about another domain
    (("mx.google.com; dmarc=fail",), Verdict.FAIL),  # no header.from: the provider's result about this message
    ((MICROSOFT,), Verdict.NONE),  # no authserv-id at all: off the grammar, not believed
    (("mx.google.com; dmarc=fail header.from=rcpt.example (" + "x" * 5000 + ")",), Verdict.NONE),  # cut to fit
    (("mx.google.com dmarc=fail",), Verdict.NONE),  # not RFC 8601
    ((), Verdict.NONE),
])
def test_the_verdict_under_the_trusted_id(results: tuple[str, ...], expected: Verdict) -> None:
    assert dmarc_verdict(_message(*results), ID, "rcpt.example") is expected


def test_no_trusted_id_reads_no_verdict() -> None:
    assert dmarc_verdict(_message(GMAIL_FAIL), None, "rcpt.example") is Verdict.NONE
    assert dmarc_verdict(_message(GMAIL_PASS), "", "rcpt.example") is Verdict.NONE


def test_many_headers_are_read_within_a_bound() -> None:
    # a fail past the first 16 headers is not read: what the sender stacks up costs a fixed time
    results = ["mx.google.com; dmarc=none header.from=rcpt.example"] * 16 + [GMAIL_FAIL]
    assert dmarc_verdict(_message(*results), ID, "rcpt.example") is Verdict.NONE
