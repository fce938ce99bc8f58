"""Failure classification against replies the providers publish, and each class's response."""

from __future__ import annotations

import pytest

from warmup.failures import FailureClass, classify, split_reply

Q, R, A, P, C, T = (FailureClass.ACCOUNT_QUOTA, FailureClass.RATE_LIMITED, FailureClass.ACCOUNT_AUTH,
                    FailureClass.RECIPIENT, FailureClass.CONTENT, FailureClass.TRANSIENT)

# Replies as the providers document them (Gmail's SMTP error reference, Microsoft's Exchange Online NDR list,
# Yahoo's sender error codes), with the class each must get.
PROVIDER_REPLIES = [
    # Gmail
    ("550 5.4.5 Daily user sending limit exceeded. For more information on Gmail sending limits go to", Q),
    ("550 5.4.5 Daily SMTP relay sending limit exceeded for customer.", Q),
    ("421 4.7.28 Our system has detected an unusual rate of unsolicited mail originating from your DKIM domain.", R),
    ("550 5.7.28 Our system has detected an unusual rate of unsolicited mail originating from your IP address.", R),
    ("421 4.7.0 Try again later, closing connection.", R),
    ("454 4.7.0 Too many login attempts, please try again later.", R),
    ("550 5.7.1 Our system has detected an unusual rate of unsolicited mail originating from your IP address. "
     "To protect our users from spam, mail sent from your IP address has been blocked.", R),
    ("535 5.7.8 Username and Password not accepted. For more information, go to", A),
    ("534 5.7.9 Application-specific password required.", A),
    ("530 5.7.0 Authentication Required.", A),
    ("550 5.1.1 The email account that you tried to reach does not exist.", P),
    ("550 5.2.1 The email account that you tried to reach is disabled.", P),
    ("552 5.2.2 The email account that you tried to reach is over quota.", P),
    ("550 5.7.1 Our system has detected that this message is likely unsolicited mail.", C),
    ("552 5.7.0 This message was blocked because its content presents a potential security issue.", C),
    ("550 5.7.26 This mail has been blocked because the sender is unauthenticated.", C),
    ("552 5.3.4 Your message exceeded Google's message size limits.", C),
    ("450 4.2.1 The user you are trying to contact is receiving mail at a rate that prevents additional messages "
     "from being delivered.", T),
    ("452 4.2.2 The email account that you tried to reach is over quota.", T),
    ("421 4.3.0 Temporary System Problem. Try again later.", T),
    ("451 4.3.0 Mail server temporarily rejected message.", T),
    # Microsoft (Exchange Online / Outlook.com)
    ("554 5.2.0 STOREDRV.Submission.Exception:OutboundSpamException; Failed to process message due to a "
     "permanent exception with message WASCL UserAction verdict is not None.", Q),
    ("554 5.2.0 STOREDRV.Submission.Exception:SubmissionQuotaExceededException; Failed to process message.", Q),
    ("535 5.7.3 Authentication unsuccessful", A),
    ("535 5.7.139 Authentication unsuccessful, SmtpClientAuthentication is disabled for the Tenant.", A),
    ("530 5.7.57 Client not authenticated to send mail.", A),
    ("550 5.1.10 RESOLVER.ADR.RecipientNotFound; Recipient not found by SMTP address lookup", P),
    ("550 5.7.1 Unfortunately, messages from [192.0.2.1] weren't sent. Please contact your Internet service "
     "provider since part of their network is on our block list (S3150).", C),
    ("550 5.7.708 Service unavailable. Access denied, traffic not accepted from this IP.", C),
    ("451 4.7.650 The mail server [192.0.2.1] has been temporarily rate limited due to IP reputation.", R),
    ("451 4.7.500 Server busy. Please try again later from [192.0.2.1].", R),
    # Yahoo
    ("421 4.7.0 [TSS04] Messages from 192.0.2.1 temporarily deferred due to unexpected volume or user "
     "complaints - 4.16.55.1", R),
    ("554 delivery error: dd This user doesn't have a yahoo.com account (nobody@yahoo.com) [0]", P),
    ("554 5.7.9 Message not accepted for policy reasons.", C),
    ("553 5.7.1 [BL21] Connections will not be accepted from 192.0.2.1, because the ip is in Spamhaus's list", C),
    ("535 5.7.0 (#AUTH005) Too many bad auth attempts.", A),
]


@pytest.mark.parametrize(("reply", "expected"), PROVIDER_REPLIES, ids=[r[:40] for r, _ in PROVIDER_REPLIES])
def test_provider_replies_get_their_class(reply: str, expected: FailureClass) -> None:
    assert classify(*split_reply(reply)) is expected


def test_enhanced_code_is_read_from_text_when_not_given() -> None:
    assert classify(550, None, "5.1.1 The email account that you tried to reach does not exist.") is P


def test_unknown_4xx_is_transient_and_unknown_5xx_is_not_retried() -> None:
    assert classify(450, "4.9.9", "something new") is T
    unknown_permanent = classify(550, "5.9.9", "something new")
    assert unknown_permanent is C
    assert unknown_permanent.response.retry is False


def test_no_reply_at_all_is_transient() -> None:
    assert classify(None, None, "timed out") is T


def test_success_codes_are_not_failures() -> None:
    with pytest.raises(ValueError):
        classify(250, "2.0.0", "OK")


def test_exactly_six_classes_each_with_one_response() -> None:
    assert [c.value for c in FailureClass] == ["account_quota", "rate_limited", "account_auth", "recipient",
                                               "content", "transient"]
    assert not FailureClass.ACCOUNT_QUOTA.response.frees_slot
    assert not FailureClass.RATE_LIMITED.response.frees_slot
    assert FailureClass.RECIPIENT.response.frees_slot
    assert not FailureClass.ACCOUNT_AUTH.response.consumes_attempt
    assert not FailureClass.RECIPIENT.response.counts_for_breaker


def test_split_reply() -> None:
    assert split_reply("550 5.1.1 No such user") == (550, "5.1.1", "No such user")
    assert split_reply("554 delivery error") == (554, None, "delivery error")
