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


def _re(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


# -- the texts ---------------------------------------------------------------------------------------------------

# The sending account's own quota, not a recipient's full mailbox ("over quota", "Quota exceeded (mailbox for user
# is full)", "Quota limit exceeded (Speicherplatz ...)" are the recipient's storage and must not match).
SENDING_QUOTA = _re(
    r"submissionquotaexceeded|outboundspamexception|storedrv\.submission\.exception:quotaexceeded|"
    r"sending (?:limit|quota)|(?:daily|hourly) (?:user )?(?:sending )?(?:limit|quota) exceeded|"
    r"message count quota exceeded|mail limit has been reached|reached your daily limit for message recipients|"
    r"number (?:of )?(?:messages|recipients) per (?:hour|day) exceeded|"
    r"(?:versand|sende)-?limit|送信(?:数|量)?の?(?:上限|制限)"
)
# A rate limit on the sender: Gmail, Microsoft, Yahoo's [TS..] codes, Tencent, IONOS, Orange (French), German hosts.
RATE_LIMIT = _re(
    r"unusual rate|rate[ -]?limit|too many (?:messages(?! (?:on|in) (?:the|this|your) (?:server|mailbox|account))|"
    r"connections|concurrent|recipients)|submission rate|"
    r"\[TS[S0-9]\d*\]|deferred due to (?:unexpected volume|user complaints)|sender thread limit|"
    r"concurrent connections? limit|(?:connection|ip) frequency limit|trop de connexions|"
    r"zu viele (?:verbindungen|nachrichten|e-?mails)"
)
# Providers that name a rate limit by a published code rather than in words. Spectrum (Charter) answers mail into
# its domains with "AUP#In-NNNN" (spectrum.net/support/internet/understanding-email-error-codes): 1300-1340 too many
# connections, 1350-1490 too many messages or recipients, 1540 too many messages in one session, 1550 too many
# recipients in one message, 1580 too many recipients in a short time; its other codes name blocks and policies.
_SPECTRUM_CODE = _re(r"\bAUP#(?:In?|O(?:ut)?)-?(\d{4})\b")
SPECTRUM_RATE_CODES = frozenset(range(1300, 1491)) | {1540, 1550, 1580}
# The provider stopped taking logins from the account for a while (Gmail's `454 4.7.0 Too many login attempts`):
# whatever code it carries, another login only extends the lock, so the account is stopped, not cooled down.
LOGINS_LOCKED = _re(r"too many (?:failed )?(?:login|authentication|auth) (?:attempts|failures)")
# Exchange Online stops a mailbox's SMTP AUTH submissions after repeated errors that "won't correct [themselves]
# without human intervention" (5.2.251 mailbox full, 5.2.252 send as denied, 5.2.253 invalid license, 5.2.254 too
# many recipients, 5.2.255 invalid recipients: learn.microsoft.com/exchange/mail-flow-best-practices/
# continuous-error-throttling-smtp-auth-submissions): the account is stopped until a person fixes it.
CONTINUOUS_ERROR_THROTTLE_CODES = frozenset({f"5.2.{n}" for n in range(251, 256)})
AUTH_FAILED = _re(
    r"authentication (?:unsuccessful|failed|credentials invalid)|username and password not accepted|"
    r"#auth\d+|invalid credentials|client not authenticated"
)
# The account may not send as this From/envelope address: a setting to fix, not a recipient to suppress.
SENDER_REFUSED = _re(
    r"sender address rejected|send ?as ?denied|send as (?:this )?sender|not (?:allowed|permitted) to send as|"
    r"not owned by|domain of sender address|unrout(?:e)?able sender"
)
# The recipient's domain does not exist (NXDOMAIN, a null MX), as opposed to a lookup that failed for now.
DOMAIN_MISSING = _re(
    r"host or domain name not found.*host not found(?!, try again)|nxdomain|domain name not found|invalid domain|"
    r"\bhost (?:\S{1,253} )?not found|name or service not known|no such host|"
    r"illegal host/domain name|host does not accept mail|"
    r"nonexistentdomain|domain (?:name )?does not exist|no such domain|unrouteable mail domain|\bhost unknown|"
    r"couldn't find any host (?:named|by that name)|couldn't find a mail exchanger|"
    r"returned null mx|doesn't receive email according to the administrator|"
    r"domaine inexistant|domain existiert nicht|ドメインが存在しません"
)
DOMAIN_LOOKUP_TEMPORARY = _re(r"try again|temporar|servfail|timed out")
# The domain's name servers answer, but with a reply no MTA can use (Postfix's "Malformed or unexpected name server
# reply": an MX naming an address or an alias): final when the relay gave up on it (a permanent Status), a lookup to
# try again when it did not.
DOMAIN_DNS_BROKEN = _re(r"malformed (?:or unexpected )?name server reply")
# The recipient does not exist or cannot receive: English, French (Orange, La Poste, SFR), German (Web.de, GMX),
# Japanese.
RECIPIENT_GONE = _re(
    r"user unknown|unknown user|no such (?:user|mailbox|recipient|address)|does(?: not|n't) exist|"
    r"recip(?:ient)?notfound|recipient not found|user not found|mailbox not found|mailbox unavailable|"
    r"invalid recipient|unknown recipient|no valid recipients?|invalid (?:final delivery )?user ?(?:id|name)?\b|"
    # Postfix's "Recipient address rejected:" prefixes any refusal of its recipient restrictions: it is the
    # recipient's unless the reason after it names our message or the destination's system ("Spam detected",
    # "Message too big", "Mailer error"), which then decides by its own words and codes.
    r"(?:recipient |(?<!sender ))address rejected(?!:[^.;(<-]{0,60}?\b(?:spam|virus|polic|content|media|message|"
    r"mailer|system|internal|authori[sz]ed|blocked|dmarc|spf))|recipient rejected|"
    r"unknown or illegal (?:user|alias)|doesn't have a [\w.]+ account|not our (?:user|customer)|"
    r"no mailbox here|account (?:has been |is )?(?:disabled|inactive|discontinued)|disabled recipient|"
    r"mailbox is frozen|address couldn't be found|domain is not reachable\. please check the domain|"
    r"^\s*<?[^\s<>@]+@[^\s<>@]+>?\s+rejected\.?\s*$|"
    r"is (?:disabled|inactive)|no longer on server|unrouteable address|"
    r"resolver\.rst\.(?:authrequired|notauthorized|restrictedtorecipients)|"
    r"is not a known user|deactivated (?:mailbox|account|user)|is deactivated|bad[_ ]recipient|badrcptto|"
    r"no mail ?box(?:es)? (?:found|available|here)|not an? (?:active|valid) (?:address|user|account|mailbox|recipient)|"
    r"addressee unknown|(?:e-?mail )?address is (?:wrong|invalid|no longer valid)|"
    r"mail-?box not found|"
    r"not listed in (?:the )?(?:domino directory|public (?:name (?:&|and) )?address book|address book)|"
    r"destinataire (?:invalide|inconnu)|utilisateur inconnu|adresse inconnue|compte du destinataire est bloqu|"
    r"benutzer (?:nicht bekannt|unbekannt)|empf(?:ä|ae)nger (?:unbekannt|existiert nicht)|"
    r"(?:postfach|adresse) existiert nicht|存在しません|ユーザー(?:が)?(?:不明|見つかりません)"
)
# The words a server uses for an address it does not know (a subset of RECIPIENT_GONE: not disabled, not full).
USER_UNKNOWN = _re(r"user unknown|unknown user|no such (?:user|mailbox|recipient)|unknown recipient|user not found")
# The recipient's mailbox is full: permanent replies suppress the address (as X.2.2 does), temporary ones wait.
MAILBOX_FULL = _re(
    r"(?:mail ?box|mail ?folder|account|inbox) (?:is )?full|over ?quota|quota (?:exceeded|violation)|"
    r"would exceed (?:the )?(?:mailbox )?quota|mail ?box exceeds (?:the |its )?(?:allowed|maximum) (?:size|quota)|"
    r"out of storage space|exhausted allowed storage|over (?:disk|storage) quota|"
    r"too many messages (?:on|in) (?:the|this|your) (?:server|mailbox|account)|"
    r"exceeded (?:its|the|their|his|her) (?:disk|storage) (?:space )?(?:limit|quota)|"
    r"speichervolumen|boîte (?:aux lettres )?pleine|メールボックスがいっぱい"
)
# The destination's MX will not take mail for the recipient's domain ("Relaying denied", qmail's "not in my list of
# allowed rcpthosts", "trying to use me as a relay"): said by the recipient's own MX in a relay's bounce, the
# domain is not served where its MX record points, and no later send gets through (RFC 5321 3.6.2: a server that
# is not the domain's final destination refuses to relay). Said by our submission server, it is our account's.
RELAY_REFUSED = _re(r"relaying (?:denied|not (?:permitted|allowed))|relay (?:access )?denied|unable to relay|"
                    r"we do not relay|(?:not|n.t) (?:in|on) my list of (?:allowed )?rcpthosts|use me .{0,80}as a relay")
# Our message is too big for the destination (RFC 3463 X.3.4, X.2.3 in words): whatever code a server puts with it
# (a 5.1.1 on "max message size exceeded"), the address is not at fault and a smaller message would pass.
MESSAGE_TOO_BIG = _re(r"message (?:size|length) exceeds|(?:max(?:imum)? )?message size (?:limit )?exceeded|"
                      r"message (?:is )?too (?:big|large)|exceeds (?:the )?max(?:imum)? (?:message )?size")
# The recipient's inbox is flooded (Gmail X.2.1 "receiving mail at a rate that prevents ..."): congestion.
RECIPIENT_FLOODED = _re(r"receiving (?:mail|email) (?:at a rate|too quickly)")
CONTENT_TEXT = _re(r"spam|policy|block ?list|blocked|blacklist|spamhaus|virus|dmarc|\bspf\b|content")
# A block list named in the reply: a verdict on our sending IP or domain, whatever code a server puts with it
# (GoDaddy answers `553 5.1.3` and a Spamhaus URL).
BLOCKLIST_TEXT = _re(r"spamhaus|block ?list|blacklist|\bdnsbl\b|\brbl\b")
# The destination cannot take it for now, whatever the code says: a routing loop (RFC 3463 X.4.6), a service
# unavailable for the moment, a connection that timed out or was refused (an MTA that gave up on an unreachable
# host: X.4.1/X.4.7 in substance), its own local delivery program (Exim's `pipe to |...`) failing.
# The destination's local delivery program failing on its own files (procmail's `Couldn't create "<mailbox>"`,
# `Lock failure on`, `Error while writing to`): the mail system there, not the address (RFC 3463 X.3.0 in substance).
# The MTA runs that program only for a recipient it accepted as local, so this outranks words about a user in the
# same line (Postfix's `x-unix; procmail: Couldn't create "/var/spool/mail/neko" id: ...: No such user`).
LOCAL_DELIVERY_FAILED = _re(r"procmail: (?:couldn't create|lock failure|error while writing)")
# The relay gave up after retrying for days (RFC 3463 X.4.7, in words): the delivery, not the address, ran out of
# time. A reason stated with it (a full mailbox) decides first.
GAVE_UP_RETRYING = _re(r"delivery time expired|retry time(?:out)? (?:exceeded|expired)|delivery failed \d+ attempts")
UNAVAILABLE_FOR_NOW = _re(r"(?:unable|wasn't able|was not able) to (?:establish an smtp connection|connect to)|"
                          r"routing loop|hop count exceeded|too many hops|service (?:is )?(?:currently|temporarily) "
                          r"unavailable|\bpipe to \||connection (?:timed out|refused)|no route to host")
SERVER_BUSY = _re(r"server busy")

# Enhanced codes that name the provider's content or policy verdict (Gmail, Microsoft, Yahoo).
CONTENT_CODES = frozenset({"5.7.0", "5.7.1", "5.7.9", "5.7.25", "5.7.26", "5.7.27", "5.7.509", "5.7.606",
                           "5.7.708", "5.3.4", "5.2.3", "5.6.0"})
AUTH_CODES = frozenset({"5.7.8", "5.7.139", "5.7.57", "5.7.11", "5.7.60"})
# RFC 7372's codes for the message's own authentication failing at the receiver: no DKIM signature or a failing
# one (X.7.20-X.7.22), SPF (X.7.23, X.7.24), reverse DNS (X.7.25), several checks (X.7.26, DMARC). They name our
# message and sending IP, so they decide over Postfix's generic "Recipient address rejected:" wording.
MESSAGE_AUTH_CODES = frozenset({f"5.7.{n}" for n in range(20, 27)})
AUTH_REPLY_CODES = frozenset({530, 534, 535, 538})
# X.1.x details that name the *sender's* address (RFC 3463 X.1.7, X.1.8), or nothing in particular (X.1.0).
SENDER_ADDRESS_DETAILS = frozenset({"7", "8"})
NOT_RECIPIENT_DETAILS = frozenset({"0", "5"}) | SENDER_ADDRESS_DETAILS


# -- the rules, in precedence order -----------------------------------------------------------------------------

Predicate = Callable[[Reply], bool]


def _no_reply_before_end_of_data(r: Reply) -> bool:
    return r.code is None and r.stage is not None and r.stage is not SmtpStage.AFTER_DATA


def _no_reply_after_end_of_data(r: Reply) -> bool:
    # No stage given: the caller cannot rule out that the dot went out, so the safe answer is "maybe sent".
    return r.code is None


def _provider_rate_code(r: Reply) -> bool:
    spectrum = _SPECTRUM_CODE.search(r.text)
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
CONNECTING_IP_TEXT = _re(
    r"banned sending ip|traffic not accepted from this ip|client host \[?[\d.:a-f]+\]? blocked using|"
    r"reputation of (?:the |your )?(?:sending |connecting )?ip|"
    r"\bip(?: address)? (?:\[?[\d.]+\]? )?has (?:a )?(?:poor|low|bad) reputation|"
    r"(?:your|sending|connecting|client) ip(?: address)? (?:\[?[\d.]+\]? )?(?:is |was )?"
    r"(?:listed|blacklisted|blocklisted)|"
    r"(?:mail|messages?) (?:sent )?from your ip(?: address)? (?:has been|is|was) blocked"
)


_SEND_AS_CODE = _re(r"(?<![\d.])5\.7\.60(?![\d.])")


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
