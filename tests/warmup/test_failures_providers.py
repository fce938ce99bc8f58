"""Gmail's and Exchange Online's submission replies, read the way each provider means them.

Each reply is quoted as the provider documents it (the reference beside each group; docs/failure-classes.md has
the same table): its class, and for the refusals that blame the address we connect from, that they do (the send
path retires that address and sends the row from another: sender.sending.outcomes).
"""

from __future__ import annotations

import pytest

from sender.ledger.store import Settle
from sender.sending.outcomes import decide
from sender.sending.submission import Result, ResultKind, Stage
from warmup.failures import FailureClass, blames_connecting_ip, classify

Q, R, A, C = (FailureClass.ACCOUNT_QUOTA, FailureClass.RATE_LIMITED, FailureClass.ACCOUNT_AUTH,
              FailureClass.CONTENT)

# (provider's reference, reply, class)
SUBMISSION_REPLIES = [
    # Gmail SMTP errors and codes: support.google.com/a/answer/3726730;
    # sending limits: support.google.com/a/answer/166852
    ("google:3726730", "550 5.4.5 Daily user sending limit exceeded. For more information on Gmail sending limits "
                       "go to https://support.google.com/a/answer/166852", Q),
    ("google:3726730", "550 5.4.5 Daily SMTP relay limit exceeded for user. For more information on SMTP relay "
                       "sending limits please contact your administrator or visit "
                       "https://support.google.com/a/answer/166852", Q),
    ("google:3726730", "454 4.7.0 Too many login attempts, please try again later. For more information, go to "
                       "https://support.google.com/mail/answer/7126229", R),
    ("google:3726730", "535 5.7.8 Username and Password not accepted. For more information, go to "
                       "https://support.google.com/mail/?p=BadCredentials", A),
    ("google:3726730", "534 5.7.9 Application-specific password required. For more information, go to "
                       "https://support.google.com/mail/?p=InvalidSecondFactor", A),
    ("google:3726730", "421 4.7.0 Try again later, closing connection.", R),
    ("google:3726730", "550 5.7.28 Our system has detected an unusual rate of unsolicited mail originating from "
                       "your IP address.", R),
    # Exchange Online: SMTP AUTH submission limits (learn.microsoft.com/exchange/troubleshoot/send-emails/
    # smtp-submission-improvements), its continuous-error throttling (learn.microsoft.com/exchange/
    # mail-flow-best-practices/continuous-error-throttling-smtp-auth-submissions), its NDR reference
    # (learn.microsoft.com/exchange/mail-flow-best-practices/non-delivery-reports-in-exchange-online/
    # non-delivery-reports-in-exchange-online) and the SMTP AUTH notice in the reply itself (aka.ms/smtp_auth_disabled).
    ("ms:smtp-submission-improvements", "432 4.3.2 Concurrent connections limit exceeded.", R),
    ("ms:smtp-submission-improvements", "432 4.3.2 STOREDRV.ClientSubmit; sender thread limit exceeded.", R),
    ("ms:smtp-submission-improvements", "554 5.2.0 STOREDRV.Submission.Exception:SubmissionQuotaExceededException; "
                                        "Failed to process message due to a permanent exception with message "
                                        "Cannot submit message.", Q),
    ("ms:smtp-submission-improvements", "554 5.2.2 mailbox full; STOREDRV.Submission.Exception:"
                                        "QuotaExceededException.MapiExceptionShutoffQuotaExceeded", Q),
    ("ms:continuous-error-throttling", "550 5.2.251 Sender throttled due to continuous mailbox full errors.", A),
    ("ms:continuous-error-throttling", "550 5.2.252 Sender throttled due to continuous send as denied errors.", A),
    ("ms:continuous-error-throttling", "550 5.2.253 Sender throttled due to continuous invalid license errors.", A),
    ("ms:ndr", "554 5.2.0 STOREDRV.Submission.Exception:SendAsDeniedException.MapiExceptionSendAsDenied; Failed to "
               "process message due to a permanent exception with message Cannot submit message.", A),
    ("ms:ndr", "550 5.7.60 SMTP; Client does not have permissions to send as this sender", A),
    ("ms:ndr", "535 5.7.139 Authentication unsuccessful, SmtpClientAuthentication is disabled for the Tenant. "
               "Visit https://aka.ms/smtp_auth_disabled for more information.", A),
    ("ms:ndr", "535 5.7.3 Authentication unsuccessful", A),
]

# (provider's reference, reply): each blames the address we connected from, not the mailbox nor the message.
IP_BLAMING = [
    ("ms:ndr 5.7.606-649", "550 5.7.606 Access denied, banned sending IP [198.51.100.7]. To request removal from "
                           "this list please visit https://sender.office.com/ and follow the directions."),
    ("ms:ndr 5.7.606-649", "550 5.7.649 Access denied, banned sending IP [198.51.100.7]"),
    ("ms:ndr 5.7.708", "550 5.7.708 Service unavailable. Access denied, traffic not accepted from this IP."),
    ("google:3726730", "421 4.7.0 [198.51.100.7] Our system has detected that this message is suspicious due to "
                       "the very low reputation of the sending IP address. To best protect our users from spam, "
                       "the message has been blocked."),
    ("google:3726730", "550 5.7.1 Our system has detected an unusual rate of unsolicited mail originating from "
                       "your IP address. To protect our users from spam, mail sent from your IP address has been "
                       "blocked."),
    ("postfix reject_rbl_client", "554 5.7.1 Service unavailable; Client host [198.51.100.7] blocked using "
                                  "zen.spamhaus.org; https://www.spamhaus.org/query/ip/198.51.100.7"),
    ("generic", "550 5.7.1 The IP address 198.51.100.7 has a poor reputation"),
]

# Refusals that name a block list or a policy, but not the address we connect from: they keep their class.
NOT_IP_BLAMING = [
    "550 5.7.26 This mail has been blocked because the sender is unauthenticated.",
    "550 5.7.1 Our system has detected that this message is likely unsolicited mail.",
    "421 4.7.0 [198.51.100.7] Our system has detected that this message is suspicious due to the very low "
    "reputation of the sending domain.",
    "550 5.7.28 Our system has detected an unusual rate of unsolicited mail originating from your IP address.",
    "550 5.7.511 Access denied, banned sender[ana@example.com]",
    "550 5.7.60 SMTP; Client does not have permissions to send as this sender",
]


def _split(reply: str) -> tuple[int, str]:
    code, text = reply.split(" ", 1)
    return int(code), text


@pytest.mark.parametrize(("reference", "reply", "expected"), SUBMISSION_REPLIES,
                         ids=[reply[:48] for _, reply, _ in SUBMISSION_REPLIES])
def test_submission_replies_get_the_class_the_provider_means(reference: str, reply: str,
                                                             expected: FailureClass) -> None:
    code, text = _split(reply)
    assert classify(code, None, text, stage=None) is expected, reference
    assert not blames_connecting_ip(code, text)


@pytest.mark.parametrize(("reference", "reply"), IP_BLAMING, ids=[reply[:48] for _, reply in IP_BLAMING])
def test_refusals_that_blame_the_connecting_ip(reference: str, reply: str) -> None:
    code, text = _split(reply)
    assert blames_connecting_ip(code, text), reference
    outcome = decide(Result(ResultKind.REJECTED, Stage.RCPT, code, text), retry_delay_s=1800)
    # sent again at once from another address; the reservation cancelled as never attempted: no class, no cooldown
    assert (outcome.settle, outcome.failure, outcome.retire_source, outcome.delay_s) == (Settle.REROUTE, None,
                                                                                         True, 0.0)


@pytest.mark.parametrize("reply", NOT_IP_BLAMING, ids=[reply[:48] for reply in NOT_IP_BLAMING])
def test_refusals_that_do_not_blame_the_connecting_ip(reply: str) -> None:
    code, text = _split(reply)
    assert not blames_connecting_ip(code, text)
    assert not decide(Result(ResultKind.REJECTED, Stage.RCPT, code, text), retry_delay_s=1800).retire_source


@pytest.mark.parametrize("reply", [
    "554 5.2.0 STOREDRV.Submission.Exception:SendAsDeniedException.MapiExceptionSendAsDenied; Failed to process "
    "message due to a permanent exception with message Cannot submit message.",
    "550 5.7.60 SMTP; Client does not have permissions to send as this sender",
    "550 5.2.252 Sender throttled due to continuous send as denied errors.",
])
def test_a_send_as_refusal_names_the_from_mismatch(reply: str) -> None:
    code, text = _split(reply)
    outcome = decide(Result(ResultKind.REJECTED, Stage.AFTER_DATA, code, text), retry_delay_s=1800)
    assert (outcome.settle, outcome.failure) == (Settle.REROUTE, FailureClass.ACCOUNT_AUTH)
    assert "may not send as the From" in outcome.detail and "Send As" in outcome.detail


def test_a_wrong_password_does_not_talk_of_send_as() -> None:
    outcome = decide(Result(ResultKind.REJECTED, Stage.AUTH, 535, "5.7.3 Authentication unsuccessful"), 1800)
    assert outcome.failure is FailureClass.ACCOUNT_AUTH and "Send As" not in outcome.detail
