"""Where a bounce's remote server refused, read from the relay's report, and what it changes: an "unknown user"
after the end of DATA is the recipient's filter refusing our sender (the address passed RCPT), so it is noted as a
soft bounce and never suppresses; the same words with no stage known still suppress."""

from __future__ import annotations

import email

from sender.feedback.bounces import MessageKind, failure_fields, parse
from tests.sender import inbox_samples as samples
from warmup.failures import SmtpStage

OURS = "<ours-1@sender.example>"
LEAD = "lead@rcpt.example"


def _report(human: str) -> email.message.Message:
    return email.message_from_bytes(samples._dsn(
        sender="MAILER-DAEMON@mx.sender.example", subject="Undelivered", own_id="<dsn@mx.sender.example>", to=LEAD,
        action="failed", status="5.0.0", diagnostic="smtp; 550 User unknown", returned="", human=human))


def test_postfix_and_exim_name_the_end_of_data_and_nothing_else_is_read_as_it() -> None:
    postfix = "<lead@rcpt.example>: host mx[192.0.2.1] said: 550 User unknown (in reply to end of DATA\r\n    command)"
    exim = "  lead@rcpt.example\r\n    SMTP error from remote mail server after end of data:\r\n    host mx: 550 :"
    rcpt = "<lead@rcpt.example>: host mx[192.0.2.1] said: 550 User unknown (in reply to RCPT TO command)"
    assert [failure_fields(_report(text))[3] for text in (postfix, exim, rcpt, "")] == \
        [SmtpStage.AFTER_DATA, SmtpStage.AFTER_DATA, None, None]


def test_docomos_filter_after_the_end_of_data_is_a_soft_bounce_of_content() -> None:
    parsed = parse(samples.docomo_filter(OURS, LEAD))
    assert (parsed.kind, parsed.about, parsed.recipients) == (MessageKind.SOFT_BOUNCE, (OURS,), frozenset({LEAD}))
    assert parsed.detail.startswith("content: 5.0.0 smtp; 550 Unknown user")


def test_the_same_words_refused_at_rcpt_are_a_hard_bounce() -> None:
    at_rcpt = samples.docomo_filter(OURS, LEAD).replace(b"(in reply to end of DATA\r\n    command)",
                                                          b"(in reply to RCPT TO command)")
    parsed = parse(at_rcpt)
    assert (parsed.kind, parsed.detail.split(":")[0]) == (MessageKind.HARD_BOUNCE, "recipient")
