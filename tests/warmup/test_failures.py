"""Failure classification against replies the providers publish, and each class's response."""

from __future__ import annotations

import smtplib
import ssl

import pytest

from warmup.failures import (
    RULES,
    FailureClass,
    SmtpStage,
    classify,
    classify_bounce,
    classify_error,
    explain,
    split_reply,
)

Q, R, A, P, C, T, U = (FailureClass.ACCOUNT_QUOTA, FailureClass.RATE_LIMITED, FailureClass.ACCOUNT_AUTH,
                       FailureClass.RECIPIENT, FailureClass.CONTENT, FailureClass.TRANSIENT, FailureClass.UNKNOWN)

# Replies as the providers document them (Gmail's SMTP error reference, Microsoft's Exchange Online NDR list,
# Yahoo's sender error codes), with the class each must get.
PROVIDER_REPLIES = [
    # Gmail
    ("550 5.4.5 Daily user sending limit exceeded. For more information on Gmail sending limits go to", Q),
    ("550 5.4.5 Daily SMTP relay sending limit exceeded for customer.", Q),
    ("421 4.7.28 Our system has detected an unusual rate of unsolicited mail originating from your DKIM domain.", R),
    ("550 5.7.28 Our system has detected an unusual rate of unsolicited mail originating from your IP address.", R),
    ("421 4.7.0 Try again later, closing connection.", R),
    # logins locked for a while, the reply says to try later: a rate limit that cools the mailbox down, never a
    # disconnect (issue 39); a permanent lock stops the mailbox (issue 28)
    ("454 4.7.0 Too many login attempts, please try again later.", R),
    ("535 5.7.8 Too many failed login attempts, account locked.", A),
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


def test_no_reply_before_the_end_of_data_is_transient() -> None:
    for stage in (SmtpStage.CONNECT, SmtpStage.HELO, SmtpStage.AUTH, SmtpStage.MAIL, SmtpStage.RCPT, SmtpStage.DATA):
        assert classify(None, None, "timed out", stage=stage) is T, stage


def test_no_reply_after_the_end_of_data_is_unknown_never_transient() -> None:
    # The dot went out: the server may have accepted the message, so it must not be sent again.
    assert classify(None, None, "timed out", stage=SmtpStage.AFTER_DATA) is U
    assert classify(None, None, "connection reset", stage=SmtpStage.AFTER_DATA) is U


def test_no_reply_with_no_stage_given_is_unknown() -> None:
    # A caller that does not say where it failed cannot rule out an accepted message: the safe side.
    assert classify(None, None, "timed out") is U


def test_a_reply_after_the_end_of_data_is_a_definite_answer() -> None:
    assert classify(451, "4.3.0", "Mail server temporarily rejected message.", SmtpStage.AFTER_DATA) is T
    assert classify(550, "5.7.1", "Our system has detected that this message is likely unsolicited mail.",
                    SmtpStage.AFTER_DATA) is C


def test_the_stage_accepts_its_string_value() -> None:
    assert classify(None, None, "", stage="after_data") is U  # type: ignore[arg-type]


def test_a_permanent_reply_to_auth_is_an_account_failure_whatever_its_text() -> None:
    assert classify(550, "5.7.1", "Access denied", stage=SmtpStage.AUTH) is A
    assert classify(525, "5.7.13", "User Account Disabled", stage=SmtpStage.AUTH) is A  # RFC 4954
    assert classify(454, "4.7.0", "Temporary authentication failure", stage=SmtpStage.AUTH) is T


def test_success_codes_are_not_failures() -> None:
    with pytest.raises(ValueError):
        classify(250, "2.0.0", "OK")


def test_the_second_argument_may_be_the_reply_text() -> None:
    # classify(code, text): what a caller holding smtplib's (code, message) writes.
    assert classify(550, "5.1.1 The email account that you tried to reach does not exist.") is P
    assert classify(550, "User unknown") is P
    assert classify(421, "Try again later") is T


class TestPrecedence:
    """docs/failure-classes.md: each step beats the ones after it."""

    def test_rate_limit_text_beats_an_addressing_code(self) -> None:
        assert explain(550, "5.1.1", "Too many connections, slow down").rule == "rate_limit_text"

    def test_sending_quota_text_beats_any_code(self) -> None:
        verdict = explain(550, "5.1.1", "Daily user sending limit exceeded")
        assert (verdict.failure, verdict.rule) == (Q, "sending_quota_text")
        assert classify(451, "4.4.5", "Daily user sending limit exceeded") is Q

    def test_a_recipients_full_mailbox_is_not_the_sending_quota(self) -> None:
        assert classify(552, "5.2.2", "The email account that you tried to reach is over quota.") is P
        assert classify(452, "4.2.2", "The email account that you tried to reach is over quota.") is T

    def test_an_addressing_code_is_recipient_whatever_the_reply_code(self) -> None:
        assert classify(450, "4.1.1", "try later") is P
        assert classify(550, "5.1.2", "no comment") is P
        assert classify(550, "5.1.10", "") is P

    def test_sender_address_codes_are_the_accounts_not_the_recipients(self) -> None:
        assert classify(553, "5.1.8", "bad sender") is A
        assert classify(501, "5.1.7", "bad sender syntax") is A
        assert classify(450, "4.1.8", "Sender address rejected: Domain not found") is T

    def test_a_network_or_congestion_code_is_transient_whatever_the_reply_code(self) -> None:
        assert explain(554, "5.4.6", "Too many hops").rule == "network_code"
        assert classify(554, "5.4.6", "Too many hops") is T
        assert classify(421, "4.4.5", "Server busy, try again later.") is T

    def test_a_missing_recipient_domain_is_recipient_not_transient(self) -> None:
        assert classify(550, "5.4.4", "Host or domain name not found. Name service error for name=x.example "
                                      "type=MX: Host not found") is P
        assert classify(450, "4.4.3", "DNS type 'mx' lookup of x.example responded with code NXDOMAIN") is P

    def test_a_dns_lookup_that_failed_for_now_stays_transient(self) -> None:
        assert classify(450, "4.4.3", "Host or domain name not found. Name service error for name=x.example "
                                      "type=MX: Host not found, try again") is T
        assert classify(450, "4.4.3", "Name service error for name=x.example type=MX: Malformed or unexpected "
                                      "name server reply") is T

    def test_a_domain_whose_dns_answer_is_unusable_is_the_recipients_once_the_relay_gives_up(self) -> None:
        # Postfix's "Malformed ... name server reply" with a permanent Status: the domain's published DNS cannot be
        # used (an MX naming an address or an alias), and every later send would fail the same way.
        assert classify(550, "5.4.4", "Name service error for name=x.example type=MX: Malformed or unexpected "
                                      "name server reply") is P

    def test_recipient_text_needs_a_permanent_reply(self) -> None:
        assert classify(550, None, "Recipient address rejected: User unknown") is P
        assert classify(450, "4.2.0", "Recipient address rejected: Greylisted") is T

    def test_unexplained_replies_fall_back_on_the_reply_code(self) -> None:
        assert explain(450, "4.9.9", "something new").rule == "temporary_reply"
        assert explain(550, "5.9.9", "something new").rule == "permanent_reply"

    def test_every_rule_is_reachable_and_named_once(self) -> None:
        names = [rule.name for rule in RULES]
        assert len(names) == len(set(names))
        seen = {explain(*case).rule for case in RULE_WITNESSES}
        seen |= {explain(*case, remote=True).rule for case in REMOTE_RULE_WITNESSES}
        assert seen == set(names)


# One reply per rule, so a rule that can never fire (shadowed by an earlier one) shows up.
RULE_WITNESSES: list[tuple[int | None, str | None, str, SmtpStage | None]] = [
    (None, None, "", SmtpStage.RCPT),
    (None, None, "", SmtpStage.AFTER_DATA),
    (454, "4.7.0", "Too many login attempts, please try again later.", None),
    (535, "5.7.8", "Too many failed login attempts, account locked.", None),
    (550, "5.2.252", "Sender throttled due to continuous send as denied errors.", None),
    (550, "5.4.5", "Daily user sending limit exceeded", None),
    (421, "4.7.28", "unusual rate of unsolicited mail", None),
    (550, "5.1.0", "sender rejected. AUP#In-1310", None),
    (535, "5.7.8", "Username and Password not accepted", None),
    (450, "4.1.8", "Sender address rejected: Domain not found", None),
    (450, "4.2.1", "The user you are trying to contact is receiving mail at a rate that prevents additional "
                   "messages from being delivered.", None),
    (550, "5.7.26", "Recipient address rejected: Multiple authentication checks failed", None),
    (550, "5.4.4", "Host or domain name not found. Name service error for name=x type=A: Host not found", None),
    (550, "5.2.0", 'procmail: Error while writing to "/var/virtmail/k/ij/it/kijitora/mailbox"', None),
    (550, None, "Unknown user", SmtpStage.AFTER_DATA),
    (550, None, "User unknown", None),
    (553, "5.1.3", "http://www.spamhaus.org/query/bl?ip=192.0.2.222", None),
    (550, "5.1.1", "RCPT TO:<a@example.org> max message size exceeded", None),
    (450, "4.1.1", "try later", None),
    (421, "4.4.5", "Server busy, try again later.", None),
    (554, None, "Service currently unavailable", None),
    (550, "5.3.0", "", None),
    (421, "4.7.0", "Try again later, closing connection.", None),
    (550, "5.2.1", "", None),
    (552, "5.2.2", "", None),
    (550, None, "retry timeout exceeded", None),
    (550, "5.7.1", "", None),
    (450, None, "", None),
    (550, None, "", None),
]
# Rules that read a destination's reply quoted in a bounce (classify_bounce), not our submission server's.
REMOTE_RULE_WITNESSES: list[tuple[int | None, str | None, str, SmtpStage | None]] = [
    (554, "5.7.1", "<k@example.org>: Relay access denied", None),
]


def test_seven_classes_each_with_one_response() -> None:
    assert [c.value for c in FailureClass] == ["account_quota", "rate_limited", "account_auth", "recipient",
                                               "content", "transient", "unknown"]
    # Every flag of every class (frees_slot, counts_for_breaker, consumes_attempt, retry): the contract the guard,
    # the breaker and the sender read.
    flags = {cls: (r.frees_slot, r.counts_for_breaker, r.consumes_attempt, r.retry)
             for cls, r in ((c, c.response) for c in FailureClass)}
    assert flags == {
        Q: (False, True, False, True),
        R: (False, True, False, True),
        A: (True, True, False, True),
        P: (True, False, True, False),
        C: (True, True, True, False),
        T: (True, True, True, True),  # the ledger uses one of the lead's attempts (issue 39)
        U: (False, False, True, False),
    }
    assert all(c.response.action for c in FailureClass)


class TestClassifyError:
    """smtplib's exceptions, at the stage the caller was in."""

    def test_a_timeout_after_the_end_of_data_is_unknown(self) -> None:
        assert classify_error(TimeoutError("timed out"), SmtpStage.AFTER_DATA) is U
        assert classify_error(smtplib.SMTPServerDisconnected("Connection unexpectedly closed"),
                              SmtpStage.AFTER_DATA) is U

    def test_a_timeout_or_refusal_before_it_is_transient(self) -> None:
        assert classify_error(ConnectionRefusedError(111, "Connection refused"), SmtpStage.CONNECT) is T
        assert classify_error(TimeoutError("timed out"), SmtpStage.RCPT) is T

    def test_a_reply_inside_the_exception_is_classified(self) -> None:
        error = smtplib.SMTPDataError(550, b"5.7.1 Our system has detected that this message is likely unsolicited")
        assert classify_error(error, SmtpStage.AFTER_DATA) is C
        auth = smtplib.SMTPAuthenticationError(535, b"5.7.8 Username and Password not accepted.")
        assert classify_error(auth, SmtpStage.AUTH) is A

    def test_refused_recipients_are_classified_by_their_reply(self) -> None:
        refused = smtplib.SMTPRecipientsRefused({"x@example.com": (550, b"5.1.1 User unknown")})
        assert classify_error(refused, SmtpStage.RCPT) is P

    def test_settings_the_provider_cannot_honour_disconnect_the_inbox(self) -> None:
        assert classify_error(smtplib.SMTPNotSupportedError("SMTP AUTH extension not supported by server."),
                              SmtpStage.AUTH) is A
        assert classify_error(ssl.SSLCertVerificationError("certificate verify failed"), SmtpStage.HELO) is A


def test_bounce_status_must_be_a_failure() -> None:
    with pytest.raises(ValueError):
        classify_bounce("2.0.0", "smtp; 250 OK")
    assert classify_bounce("5.1.1", "smtp; 550 5.1.1 User unknown") is P


def test_split_reply() -> None:
    assert split_reply("550 5.1.1 No such user") == (550, "5.1.1", "No such user")
    assert split_reply("554 delivery error") == (554, None, "delivery error")
    assert split_reply("550-5.1.1 The email account") == (550, "5.1.1", "The email account")
    assert split_reply("550 #5.1.0 Address rejected.") == (550, "5.1.0", "Address rejected.")


def test_the_enhanced_code_is_read_from_qmails_trailer() -> None:
    assert explain(554, None, "Sorry, no mailbox here by that name. (#5.1.1)").rule == "recipient_text"
    assert classify(451, None, "qq temporary problem (#4.1.1)") is P
