"""Bounces read by meaning (issue 39): a recipient's wording and a full mailbox's wording decide over codes that
name another subject, and a full mailbox is never read as a rate limit on our sender."""

from __future__ import annotations

import pytest

from warmup.failures import FailureClass, SmtpStage, classify, classify_bounce


@pytest.mark.parametrize("reply", [
    "550 5.7.1 <lead@example.org> is not a known user",
    "551 5.7.1 lead@example.org is a deactivated mailbox",
    "550 BAD_RECIPIENT",
    "553 badrcptto(user mail-box not found)",
])
def test_plain_refusals_of_a_missing_recipient_at_rcpt_are_recipient(reply: str) -> None:
    assert classify(int(reply[:3]), None, reply[4:], SmtpStage.RCPT) is FailureClass.RECIPIENT


@pytest.mark.parametrize("reply", [
    "550 5.7.1 <lead@example.org> is not a known user",
    "553 badrcptto(user mail-box not found)",
])
def test_plain_refusals_of_a_missing_recipient_with_no_stage_are_recipient(reply: str) -> None:
    assert classify(int(reply[:3]), None, reply[4:]) is FailureClass.RECIPIENT


def test_too_many_messages_on_the_server_is_a_full_mailbox_not_a_rate_limit() -> None:
    # web.de's over-quota wording: the recipient's inbox, never a reason to cool our mailbox.
    temporary = classify(452, None, "4.2.2 User has too many messages on the server", SmtpStage.RCPT)
    assert temporary is FailureClass.TRANSIENT
    assert classify_bounce("4.2.2", "smtp; 452 4.2.2 User has too many messages on the server") \
        is FailureClass.TRANSIENT


def test_a_sender_sending_too_many_messages_is_still_a_rate_limit() -> None:
    assert classify(421, None, "4.7.0 too many messages from your IP, slow down") is FailureClass.RATE_LIMITED


def test_a_mailbox_over_its_disk_space_limit_is_the_recipients_whatever_the_security_code() -> None:
    assert classify_bounce("5.7.0", "smtp; 552 5.7.0 mailbox has exceeded its disk space limit") \
        is FailureClass.RECIPIENT
