"""Bounces read by meaning (issue 39): a recipient's wording and a full mailbox's wording decide over codes that
name another subject, and a full mailbox is never read as a rate limit on our sender."""

from __future__ import annotations

import pytest

from warmup.failures import FailureClass, SmtpStage, classify, classify_bounce, explain


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


@pytest.mark.parametrize("reply", [
    "550 5.7.1 No mailbox found",
    "550 ** No mail box available for this user **",
    "550 recipient@example.net is not an active address at this host",
    "553 5.3.0 <a@example.net>... Addressee unknown",
    "550 this email address is wrong or no longer valid",
    "550 Invalid final delivery userid: a@example.net",
])
def test_a_recipients_words_decide_whatever_the_codes_subject(reply: str) -> None:
    assert classify(int(reply[:3]), None, reply[4:], SmtpStage.RCPT) is FailureClass.RECIPIENT
    assert classify(int(reply[:3]), None, reply[4:]) is FailureClass.RECIPIENT


def test_a_host_the_resolver_does_not_know_is_a_missing_domain() -> None:
    assert classify_bounce("5.0.0", "X-Postfix; [dest.example.com]: Name or service not known") \
        is FailureClass.RECIPIENT


@pytest.mark.parametrize("said", [
    "550 <a@example.com>... Relaying denied",
    "553 sorry, that domain isn't in my list of allowed rcpthosts (#5.7.1)",
    "553-you are trying to use me [mx.example.com] as a relay, but I have not been configured to let you",
])
def test_the_recipients_mx_refusing_its_own_domain_in_a_bounce_is_the_recipients(said: str) -> None:
    # Quoted in a relay's bounce, the destination will not take mail for the domain: no later send gets through.
    assert classify_bounce("5.0.0", f"smtp; {said}") is FailureClass.RECIPIENT
    # Said by our own submission server, it is not the recipient's: the address is never suppressed for it.
    assert classify(int(said[:3]), None, said[4:], SmtpStage.RCPT) is not FailureClass.RECIPIENT


@pytest.mark.parametrize("reply", [
    "552 Message for <a@example.com> would exceed mailbox quota",
    "550 a@example.net...User account is overquota",
    "552 Quota violation for a@example.com",
    "550 The e-mail message could not be delivered because the user's mailfolder is full.",
    "550 User mailbox exceeds allowed size: a@b.example",
    "550 account is full (quota exceeded)",
])
def test_a_full_mailbox_in_any_words_is_the_full_mailbox_rule(reply: str) -> None:
    verdict = explain(int(reply[:3]), None, reply[4:])
    assert (verdict.failure, verdict.rule) == (FailureClass.RECIPIENT, "mailbox_full")


def test_a_message_too_big_for_the_server_is_not_a_full_mailbox() -> None:
    assert explain(552, None, "Message exceeds maximum size").rule != "mailbox_full"


@pytest.mark.parametrize(("said", "expected"), [
    ("550 5.7.0 <a@example.net>: Recipient address rejected: Spam detected", FailureClass.CONTENT),
    ("550 5.7.0 <a@example.net>: Recipient address rejected: Policy violation", FailureClass.CONTENT),
    ("554 5.3.4 <a@example.net>: Recipient address rejected: Message too big for system", FailureClass.CONTENT),
    ("554 5.3.0 <a@example.net>: Recipient address rejected: Mailer error", FailureClass.TRANSIENT),
    ("550 5.1.1 <a@example.net>: Recipient address rejected: User unknown in local recipient table",
     FailureClass.RECIPIENT),
    ("550 5.4.1 <a@example.net>: Recipient address rejected: Access denied", FailureClass.RECIPIENT),
    ("550 5.7.1 <a@example.net>: Recipient address rejected: User a@example.net temporary locked.",
     FailureClass.RECIPIENT),
    ("550 5.7.1 <a@example.net>: Recipient address rejected", FailureClass.RECIPIENT),
])
def test_postfixs_recipient_address_rejected_is_decided_by_the_reason_after_it(said: str,
                                                                               expected: FailureClass) -> None:
    assert classify_bounce(said[4:9], f"smtp; {said}") is expected


@pytest.mark.parametrize("said", [
    "550 neko.example.org (smtp)... 550 Host unknown (Authoritative answer from name server)",
    "Sorry, I couldn't find any host named nyaan.example. (#5.1.2)",
    "Sorry, I couldn't find a mail exchanger or IP address. (#5.4.4)",
])
def test_a_relays_words_that_the_recipients_host_is_unknown_are_a_missing_domain(said: str) -> None:
    assert classify_bounce("5.0.0", f"x-report-text; {said}") is FailureClass.RECIPIENT


@pytest.mark.parametrize("words", [
    "kijitora@example.com retry timeout exceeded",
    "Delivery failed 20 attempts: kijitora@example.com",
])
def test_a_relay_that_gave_up_retrying_is_transient_not_a_refusal(words: str) -> None:
    assert classify_bounce("5.0.0", f"x-report-text; {words}") is FailureClass.TRANSIENT


def test_a_reason_given_with_the_expiry_decides_first() -> None:
    assert classify_bounce("5.0.0", "x-report-text; mailbox is full: retry timeout exceeded") \
        is FailureClass.RECIPIENT


def test_no_valid_recipients_is_the_recipients() -> None:
    assert classify_bounce("5.0.0", "x-report-text; Error: No valid recipients for this MM") is FailureClass.RECIPIENT


@pytest.mark.parametrize("said", [
    "550 5.1.1 RCPT TO:<a@example.org> max message size exceeded",
    "552 5.2.3 Message length exceeds administrative limit",
    "552 Message size exceeds fixed maximum message size",
])
def test_a_message_too_big_is_ours_whatever_code_comes_with_it(said: str) -> None:
    assert classify_bounce("5.0.0", f"smtp; {said}") is FailureClass.CONTENT
