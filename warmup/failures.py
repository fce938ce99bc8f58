"""Send failures: seven classes, each with one response, classified from the SMTP stage and the server's reply.

`RULES` below is the precedence, first match wins, and each rule is named so a caller (and a test) can see which
one decided (`explain`). In short: no reply at all is decided by the stage (after the end of DATA the message may
have been accepted: `unknown`); text naming the sending quota or a rate limit (or a provider's published rate code)
wins over any code; then the account itself (authentication, send-as); then our message's failed authentication
(RFC 7372); then a missing recipient domain; then the destination's local delivery program failing; then a missing
recipient; then a block list; then RFC 3463 enhanced codes (addressing X.1.x is `recipient`,
network/congestion X.4.x is `transient`, whatever the reply code); then a destination that cannot take it for now
(X.3.x, routing loops, connections refused); then content and policy; then the reply code. docs/failure-classes.md
documents each step; the replies behind the texts (Gmail, Microsoft 365, Yahoo, real bounces of many MTAs, French,
German and Japanese providers) are in tests/warmup/test_failures_replies.py.
"""

from __future__ import annotations

import re
import smtplib
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from warmup.failure_texts import (
    AUTH_CODES,
    AUTH_FAILED,
    AUTH_REPLY_CODES,
    BLOCKLIST_TEXT,
    CONTENT_CODES,
    CONTENT_TEXT,
    CONTINUOUS_ERROR_THROTTLE_CODES,
    DOMAIN_DNS_BROKEN,
    DOMAIN_LOOKUP_TEMPORARY,
    DOMAIN_MISSING,
    GAVE_UP_RETRYING,
    LOCAL_DELIVERY_FAILED,
    LOGINS_LOCKED,
    MAILBOX_FULL,
    MESSAGE_AUTH_CODES,
    MESSAGE_TOO_BIG,
    NOT_RECIPIENT_DETAILS,
    RATE_LIMIT,
    RECIPIENT_FLOODED,
    RECIPIENT_GONE,
    RELAY_REFUSED,
    SENDER_ADDRESS_DETAILS,
    SENDER_REFUSED,
    SENDING_QUOTA,
    SERVER_BUSY,
    SPECTRUM_CODE,
    SPECTRUM_RATE_CODES,
    UNAVAILABLE_FOR_NOW,
    USER_UNKNOWN,
    text_pattern,
)


class FailureClass(StrEnum):
    """What went wrong with a send, from the sending inbox's point of view."""

    ACCOUNT_QUOTA = "account_quota"
    RATE_LIMITED = "rate_limited"
    ACCOUNT_AUTH = "account_auth"
    RECIPIENT = "recipient"
    CONTENT = "content"
    TRANSIENT = "transient"
    # The connection timed out or dropped after the end of DATA: the server may have accepted the message.
    UNKNOWN = "unknown"

    @property
    def response(self) -> Response:
        return RESPONSES[self]


class SmtpStage(StrEnum):
    """Where in the SMTP submission a failure happened. Only AFTER_DATA can hide an accepted message."""

    CONNECT = "connect"  # TCP connect, the greeting, the TLS handshake of port 465
    HELO = "helo"  # EHLO/HELO and STARTTLS
    AUTH = "auth"
    MAIL = "mail"
    RCPT = "rcpt"
    DATA = "data"  # the DATA command and the message body, before the end-of-data dot was sent
    AFTER_DATA = "after_data"  # the end-of-data dot was sent; the server's final reply is pending or was read


@dataclass(frozen=True)
class Response:
    """What `Guard.cancel` does for a class, and what the caller should do with the lead and the job."""

    action: str  # one line for people
    frees_slot: bool  # does the reservation stop counting against today's cap?
    counts_for_breaker: bool  # is it a failure of the inbox (not of the lead list)?
    consumes_attempt: bool  # does the lead's attempt count as used?
    retry: bool  # may the caller retry the same send later?


RESPONSES: dict[FailureClass, Response] = {
    # The provider says the inbox is done for the day: sending more only deepens the hole.
    FailureClass.ACCOUNT_QUOTA: Response("park the inbox for the rest of its day", frees_slot=False,
                                         counts_for_breaker=True, consumes_attempt=False, retry=True),
    # A throttled inbox must never look more available than it is, so the slot stays used.
    FailureClass.RATE_LIMITED: Response("cool the inbox down for 4 hours", frees_slot=False,
                                        counts_for_breaker=True, consumes_attempt=False, retry=True),
    FailureClass.ACCOUNT_AUTH: Response("disconnect the inbox until resumed", frees_slot=True,
                                        counts_for_breaker=True, consumes_attempt=False, retry=True),
    FailureClass.RECIPIENT: Response("suppress the recipient address", frees_slot=True,
                                     counts_for_breaker=False, consumes_attempt=True, retry=False),
    FailureClass.CONTENT: Response("fail the job", frees_slot=True,
                                   counts_for_breaker=True, consumes_attempt=True, retry=False),
    # The ledger counts the attempt (sender_settle 'retry'): three transient failures and the row is failed.
    FailureClass.TRANSIENT: Response("retry later", frees_slot=True,
                                     counts_for_breaker=True, consumes_attempt=True, retry=True),
    # The message may be in the recipient's inbox: it counts as sent (slot kept, attempt used), it is never sent
    # again automatically (a person checks Sent Items), and it says nothing about the inbox's health.
    FailureClass.UNKNOWN: Response("mark unconfirmed: check Sent Items, never resend automatically",
                                   frees_slot=False, counts_for_breaker=False, consumes_attempt=True, retry=False),
}


@dataclass(frozen=True)
class Reply:
    """One failed step, normalized: `code` None when the server never answered."""

    code: int | None
    enhanced: str  # "5.1.1", or "" when the reply carries none
    text: str
    stage: SmtpStage | None
    # The reply is the destination's, quoted by a relay's bounce (classify_bounce), not our submission server's.
    remote: bool = False

    @property
    def permanent(self) -> bool:
        return self.code is not None and 500 <= self.code < 600

    @property
    def enhanced_subject(self) -> str:
        """The middle field of the enhanced code: "1" addressing, "2" mailbox, "4" network, "7" security..."""
        parts = self.enhanced.split(".")
        return parts[1] if len(parts) == 3 else ""

    @property
    def enhanced_detail(self) -> str:
        parts = self.enhanced.split(".")
        return parts[2] if len(parts) == 3 else ""

    def says(self, pattern: re.Pattern[str]) -> bool:
        return bool(pattern.search(self.text))


@dataclass(frozen=True)
class Classification:
    """A class and the name of the rule that decided it (see RULES)."""

    failure: FailureClass
    rule: str


# -- the rules, in precedence order -----------------------------------------------------------------------------

Predicate = Callable[[Reply], bool]


def _no_reply_before_end_of_data(r: Reply) -> bool:
    return r.code is None and r.stage is not None and r.stage is not SmtpStage.AFTER_DATA


def _no_reply_after_end_of_data(r: Reply) -> bool:
    # No stage given: the caller cannot rule out that the dot went out, so the safe answer is "maybe sent".
    return r.code is None


def _provider_rate_code(r: Reply) -> bool:
    spectrum = SPECTRUM_CODE.search(r.text)
    return spectrum is not None and int(spectrum.group(1)) in SPECTRUM_RATE_CODES


def _account_refused(r: Reply) -> bool:
    if r.stage is SmtpStage.AUTH and r.permanent:
        return True
    if r.code in AUTH_REPLY_CODES or r.enhanced in AUTH_CODES or r.says(AUTH_FAILED):
        return True
    sender_code = r.enhanced_subject == "1" and r.enhanced_detail in SENDER_ADDRESS_DETAILS
    return r.permanent and (sender_code or r.says(SENDER_REFUSED))


def _sender_refused_for_now(r: Reply) -> bool:
    sender_code = r.enhanced_subject == "1" and r.enhanced_detail in SENDER_ADDRESS_DETAILS
    return not r.permanent and (sender_code or r.says(SENDER_REFUSED) or r.stage is SmtpStage.AUTH)


def _domain_missing(r: Reply) -> bool:
    if r.permanent and r.says(DOMAIN_DNS_BROKEN):
        return True
    return r.says(DOMAIN_MISSING) and not r.says(DOMAIN_LOOKUP_TEMPORARY)


def _addressing_code(r: Reply) -> bool:
    return r.enhanced_subject == "1" and r.enhanced_detail not in NOT_RECIPIENT_DETAILS


def _unknown_user_after_data(r: Reply) -> bool:
    # A server checks the recipient at RCPT (RFC 5321 3.3); one that accepted RCPT and then says "unknown user"
    # after the end of DATA, with no addressing code (X.1.x) to state it, refuses this message or its sender, not
    # the address: NTT docomo's reception filter answers "550 Unknown user" so, for an address that exists.
    return (r.permanent and r.stage is SmtpStage.AFTER_DATA and r.enhanced_subject in {"", "0"}
            and r.says(USER_UNKNOWN))


def _recipient_text(r: Reply) -> bool:
    return r.permanent and r.says(RECIPIENT_GONE)


def _recipient_disabled(r: Reply) -> bool:
    return r.permanent and r.enhanced == "5.2.1"


def _mailbox_full(r: Reply) -> bool:
    # 5.2.2 or a full mailbox's words, permanent: the recipient's (never our mailbox's); 4.2.x waits (transient).
    # A bounce of it is soft (sender.feedback.bounces): a mailbox can be emptied.
    return r.permanent and (r.enhanced == "5.2.2" or r.says(MAILBOX_FULL))


def _network_code(r: Reply) -> bool:
    return r.enhanced_subject == "4"


def _mail_system_code(r: Reply) -> bool:
    # RFC 3463 X.3.x: "something having to do with the destination system has caused this DSN" (full, not
    # accepting, not capable): the system's state, not the address nor our message. X.3.4 (message too big for the
    # system) is our message's, and content.
    return r.enhanced_subject == "3" and r.enhanced_detail != "4"


def _sender_throttled(r: Reply) -> bool:
    # Gmail 421 4.7.0 "Try again later, closing connection"; Microsoft 451 4.7.500-699 "Server busy" throttles the
    # sender (a security-class code), unlike a plain busy server (4.4.5, rule network_code).
    if r.enhanced in {"4.7.28", "5.7.28"} or (r.code == 421 and r.enhanced == "4.7.0"):
        return True
    return r.enhanced.startswith("4.7.") and r.says(SERVER_BUSY)


def _content(r: Reply) -> bool:
    return r.permanent and (r.enhanced in CONTENT_CODES or r.enhanced.startswith("5.7.") or r.says(CONTENT_TEXT))


@dataclass(frozen=True)
class FailureRule:
    name: str
    failure: FailureClass
    applies: Predicate


RULES: tuple[FailureRule, ...] = (
    FailureRule("no_reply_before_end_of_data", FailureClass.TRANSIENT, _no_reply_before_end_of_data),
    FailureRule("no_reply_after_end_of_data", FailureClass.UNKNOWN, _no_reply_after_end_of_data),
    # A temporary reply that says to try later is a lock that lifts by itself (Gmail's 454 4.7.0, issue 39): a
    # rate limit (cooled down), never the account's fault; only a permanent one stops the mailbox.
    FailureRule("logins_locked_for_now", FailureClass.RATE_LIMITED,
                lambda r: not r.permanent and r.says(LOGINS_LOCKED)),
    FailureRule("logins_locked", FailureClass.ACCOUNT_AUTH, lambda r: r.says(LOGINS_LOCKED)),
    FailureRule("continuous_error_throttle", FailureClass.ACCOUNT_AUTH,
                lambda r: r.enhanced in CONTINUOUS_ERROR_THROTTLE_CODES),
    FailureRule("sending_quota_text", FailureClass.ACCOUNT_QUOTA, lambda r: r.says(SENDING_QUOTA)),
    FailureRule("rate_limit_text", FailureClass.RATE_LIMITED, lambda r: r.says(RATE_LIMIT)),
    FailureRule("provider_rate_code", FailureClass.RATE_LIMITED, _provider_rate_code),
    FailureRule("account_refused", FailureClass.ACCOUNT_AUTH, _account_refused),
    FailureRule("sender_refused_for_now", FailureClass.TRANSIENT, _sender_refused_for_now),
    FailureRule("recipient_flooded", FailureClass.TRANSIENT, lambda r: r.says(RECIPIENT_FLOODED)),
    FailureRule("message_authentication_code", FailureClass.CONTENT, lambda r: r.enhanced in MESSAGE_AUTH_CODES),
    FailureRule("recipient_domain_missing", FailureClass.RECIPIENT, _domain_missing),
    FailureRule("destination_refuses_domain", FailureClass.RECIPIENT,
                lambda r: r.remote and r.permanent and r.says(RELAY_REFUSED)),
    FailureRule("local_delivery_failed", FailureClass.TRANSIENT, lambda r: r.says(LOCAL_DELIVERY_FAILED)),
    FailureRule("unknown_user_after_data", FailureClass.CONTENT, _unknown_user_after_data),
    FailureRule("recipient_text", FailureClass.RECIPIENT, _recipient_text),
    FailureRule("blocklist_text", FailureClass.CONTENT, lambda r: r.says(BLOCKLIST_TEXT)),
    FailureRule("message_too_big", FailureClass.CONTENT, lambda r: r.permanent and r.says(MESSAGE_TOO_BIG)),
    FailureRule("addressing_code", FailureClass.RECIPIENT, _addressing_code),
    FailureRule("network_code", FailureClass.TRANSIENT, _network_code),
    FailureRule("unavailable_for_now", FailureClass.TRANSIENT, lambda r: r.says(UNAVAILABLE_FOR_NOW)),
    FailureRule("mail_system_code", FailureClass.TRANSIENT, _mail_system_code),
    FailureRule("sender_throttled", FailureClass.RATE_LIMITED, _sender_throttled),
    FailureRule("recipient_disabled", FailureClass.RECIPIENT, _recipient_disabled),
    FailureRule("mailbox_full", FailureClass.RECIPIENT, _mailbox_full),
    FailureRule("gave_up_retrying", FailureClass.TRANSIENT, lambda r: r.says(GAVE_UP_RETRYING)),
    FailureRule("content", FailureClass.CONTENT, _content),
    FailureRule("temporary_reply", FailureClass.TRANSIENT, lambda r: r.code is not None and 400 <= r.code < 500),
    FailureRule("permanent_reply", FailureClass.CONTENT, lambda r: r.permanent),
)

# -- a refusal that blames the connecting IP ----------------------------------------------------------------------

# The submission server refuses the address we connect from (its reputation, a block list naming it), not the
# mailbox nor the message: the cure is another source address, not a cooled-down mailbox. Exchange Online's
# 5.7.606-5.7.649 "Access denied, banned sending IP [x.x.x.x]" and 5.7.708 "traffic not accepted from this IP"
# (learn.microsoft.com/exchange/mail-flow-best-practices/non-delivery-reports-in-exchange-online), Spamhaus-style
# "Client host [x.x.x.x] blocked using zen.spamhaus.org", Gmail's "[x.x.x.x] ... low reputation of the sending IP
# address" (support.google.com/a/answer/3726730). Only submission replies are read this way (outcomes.decide):
# bounces keep their class (a bounce's IP is the relay's, not a lease of ours).
CONNECTING_IP_CODES = frozenset({f"5.7.{n}" for n in range(606, 650)} | {"5.7.708", "4.7.708"})
CONNECTING_IP_TEXT = text_pattern(
    r"banned sending ip|traffic not accepted from this ip|client host \[?[\d.:a-f]+\]? blocked using|"
    r"reputation of (?:the |your )?(?:sending |connecting )?ip|"
    r"\bip(?: address)? (?:\[?[\d.]+\]? )?has (?:a )?(?:poor|low|bad) reputation|"
    r"(?:your|sending|connecting|client) ip(?: address)? (?:\[?[\d.]+\]? )?(?:is |was )?"
    r"(?:listed|blacklisted|blocklisted)|"
    r"(?:mail|messages?) (?:sent )?from your ip(?: address)? (?:has been|is|was) blocked"
)


_SEND_AS_CODE = text_pattern(r"(?<![\d.])5\.7\.60(?![\d.])")


def refuses_send_as(text: str) -> bool:
    """Does this refusal say the login may not send as the message's From (Microsoft's SendAsDenied, 5.7.60)?"""
    return bool(SENDER_REFUSED.search(text or "") or _SEND_AS_CODE.search(text or ""))


def blames_connecting_ip(code: int | None, text: str = "", enhanced_code: str | None = None) -> bool:
    """Does this refusal blame the IP address we connected from (its reputation or a block list naming it)?"""
    if code is None or not 400 <= code < 600:
        return False
    enhanced = (enhanced_code or "").strip() or _enhanced_from_text(text or "")
    return enhanced in CONNECTING_IP_CODES or bool(CONNECTING_IP_TEXT.search(text or ""))


_ENHANCED = r"[245]\.\d{1,3}\.\d{1,3}"
_ENHANCED_AT_START = re.compile(rf"^\s*#?({_ENHANCED})\b")
_ENHANCED_QMAIL = re.compile(rf"\(#({_ENHANCED})\)")  # qmail: "... no mailbox here by that name. (#5.1.1)"
_ENHANCED_ONLY = re.compile(rf"{_ENHANCED}")


def _enhanced_from_text(text: str) -> str:
    found = _ENHANCED_AT_START.search(text) or _ENHANCED_QMAIL.search(text)
    return found.group(1) if found else ""


def explain(code: int | None, enhanced_code: str | None = None, text: str = "",
            stage: SmtpStage | None = None, remote: bool = False) -> Classification:
    """The class of a failed send and the rule that decided it. See `classify`."""
    text = text or ""
    enhanced = (enhanced_code or "").strip()
    if enhanced and not _ENHANCED_ONLY.fullmatch(enhanced):
        # classify(550, "User unknown"): the second argument was the reply text, not an enhanced code.
        text, enhanced = f"{enhanced} {text}".strip(), ""
    if not enhanced:
        enhanced = _enhanced_from_text(text)
    if code is not None and not 400 <= code < 600:
        raise ValueError(f"SMTP reply code {code} is not a failure (expected 4xx or 5xx)")
    reply = Reply(code, enhanced, text, SmtpStage(stage) if stage is not None else None, remote)
    for rule in RULES:
        if rule.applies(reply):
            return Classification(rule.failure, rule.name)
    raise AssertionError("unreachable: the last rules cover every 4xx and 5xx reply")  # pragma: no cover


def classify(code: int | None, enhanced_code: str | None = None, text: str = "",
             stage: SmtpStage | None = None) -> FailureClass:
    """The class of a failed send from its SMTP stage, reply code, enhanced status code and text.

    `code` None means no reply at all (refused, timed out, dropped): `transient` before the end of DATA, `unknown`
    after it, and `unknown` when `stage` is not given, because then the message may have been accepted. When
    `enhanced_code` is None it is read from the start of `text` (or qmail's "(#5.1.1)"); a second argument that is
    not an enhanced code is taken as the text, so `classify(550, "5.1.1 User unknown")` works too.
    """
    return explain(code, enhanced_code, text, stage).failure


def classify_error(error: BaseException, stage: SmtpStage) -> FailureClass:
    """The class of an exception raised by `smtplib` (or the socket under it) during `stage`."""
    if isinstance(error, smtplib.SMTPRecipientsRefused) and error.recipients:
        code, message = next(iter(error.recipients.values()))
        return classify(code if 400 <= code < 600 else None, None, _decode(message), stage)
    if isinstance(error, smtplib.SMTPResponseException) and 400 <= error.smtp_code < 600:
        return classify(error.smtp_code, None, _decode(error.smtp_error), stage)
    if isinstance(error, smtplib.SMTPNotSupportedError | ssl.SSLCertVerificationError):
        # The provider cannot do what this mailbox's settings ask (AUTH, STARTTLS) or its certificate does not
        # verify: retrying will not help; a person fixes the settings and resumes the inbox.
        return FailureClass.ACCOUNT_AUTH
    # Disconnected, timed out, reset, a TLS error, an answer that is not SMTP: no reply to read.
    return classify(None, None, str(error), stage)


# A reply quoted in a report's human-readable text: "<addr>: 550 5.7.26 <addr>: Recipient address rejected: ..."
_QUOTED_REPLY = re.compile(r"(?<![\d.])[45]\d\d[ -][245]\.\d{1,3}\.\d{1,3}\b")
# sysexits.h codes a local delivery program exits with (sendmail's `X-Unix; 67`): EX_NOUSER, EX_NOHOST name the
# address; the others (EX_TEMPFAIL 75, EX_NOPERM 77, a crash's 255 ...) the destination's mail system.
_SYSEXITS_RECIPIENT = frozenset({"67", "68"})


def classify_bounce(status: str, diagnostic: str = "", report_text: str = "",
                    stage: SmtpStage | None = None) -> FailureClass:
    """The class of a bounce (RFC 3464 delivery status): see `explain_bounce`."""
    return explain_bounce(status, diagnostic, report_text, stage).failure


def explain_bounce(status: str, diagnostic: str = "", report_text: str = "",
                   stage: SmtpStage | None = None) -> Classification:
    """The class of a bounce and the rule that decided it, from its (RFC 3464) `Status` and `Diagnostic-Code`.

    A diagnostic of type `smtp` quotes the remote server's reply, which is classified as such; any other
    (`X-Postfix; Host or domain name not found ...`) has no reply, and the Status class stands for the reply class.
    A DSN without a Diagnostic-Code (Exim's, OpenSMTPD's, Gmail's own) says why in its human-readable part,
    `report_text`: the first reply it quotes is classified as an `smtp` diagnostic, else its words as above. A
    Status of X.4.7 (delivery time expired, RFC 3463) is a final failure after days of retries: the temporary reply
    that kept the message out is classified as the permanent one it was in effect. `stage` is where the remote
    server refused when the relay's report says so (`AFTER_DATA`: "in reply to end of DATA command").
    """
    status = status.strip()
    if not _ENHANCED_ONLY.fullmatch(status) or status[0] == "2":
        raise ValueError(f"bounce status {status!r} is not a failure (expected 4.x.x or 5.x.x)")
    said = diagnostic.partition(";")[2] if ";" in diagnostic else diagnostic
    if not said.strip() and report_text.strip():
        quoted = _QUOTED_REPLY.search(report_text)
        diagnostic = f"smtp; {report_text[quoted.start():]}" if quoted else f"x-report-text; {report_text}"
    kind, _, detail = diagnostic.partition(";") if ";" in diagnostic else ("", "", diagnostic)
    kind = kind.strip().lower()
    if kind == "smtp":
        code, enhanced, text = split_reply(detail)
        if code is not None and 400 <= code < 600:
            if code < 500 and status.endswith(".4.7"):
                code += 100
            return explain(code, enhanced or _enhanced_from_text(text) or status, text, stage, remote=True)
    if kind == "x-unix" and detail.strip().isdigit():
        exited = FailureClass.RECIPIENT if detail.strip() in _SYSEXITS_RECIPIENT else FailureClass.TRANSIENT
        return Classification(exited, "sysexits")
    return explain(int(status[0]) * 100 + 50, status, detail.strip(), remote=True)


def _decode(message: bytes | str) -> str:
    return message.decode("utf-8", "replace") if isinstance(message, bytes) else message


def split_reply(reply: str) -> tuple[int | None, str | None, str]:
    """`'550 5.1.1 The email account ...'` -> (550, '5.1.1', 'The email account ...'); for CLI input."""
    match = re.match(r"\s*(\d{3})[ -]?(?:#?([245]\.\d{1,3}\.\d{1,3})\s*)?(.*)", reply, re.DOTALL)
    if not match:
        return None, None, reply.strip()
    return int(match.group(1)), match.group(2), match.group(3).strip()
