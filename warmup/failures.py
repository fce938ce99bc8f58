"""Send failures: six classes, each with one response, classified from the SMTP reply.

The rules come from the providers' published replies (Gmail's SMTP error reference, Microsoft's Exchange Online
NDR codes, Yahoo's sender error codes). Order matters: what the reply says about the *sending account* (quota,
authentication, rate) wins over the generic enhanced code, because a reply like Gmail's
`550 5.7.1 ... unusual rate of unsolicited mail` carries a content-looking code but asks us to slow down.
"""

from __future__ import annotations

import re
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

    @property
    def response(self) -> Response:
        return RESPONSES[self]


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
    FailureClass.TRANSIENT: Response("retry later", frees_slot=True,
                                     counts_for_breaker=True, consumes_attempt=False, retry=True),
}


@dataclass(frozen=True)
class _Rule:
    cls: FailureClass
    codes: frozenset[int] = frozenset()  # basic reply codes; empty = any
    enhanced: frozenset[str] = frozenset()  # enhanced status codes; empty = any
    text: re.Pattern[str] | None = None

    def matches(self, code: int | None, enhanced: str, text: str) -> bool:
        if self.codes and code not in self.codes:
            return False
        if self.enhanced and enhanced not in self.enhanced:
            return False
        return self.text is None or bool(self.text.search(text))


def _re(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


Q, R, A, P, C, T = (FailureClass.ACCOUNT_QUOTA, FailureClass.RATE_LIMITED, FailureClass.ACCOUNT_AUTH,
                    FailureClass.RECIPIENT, FailureClass.CONTENT, FailureClass.TRANSIENT)

RULES: tuple[_Rule, ...] = (
    # Gmail: 550 5.4.5 Daily user sending limit exceeded / Daily SMTP relay sending limit exceeded.
    _Rule(Q, enhanced=frozenset({"5.4.5"})),
    # Microsoft: ...SubmissionQuotaExceededException / OutboundSpamException (the account hit its sending limit).
    _Rule(Q, text=_re(r"submissionquotaexceeded|outboundspamexception|sending (?:limit|quota)|"
                      r"(?:daily|hourly) (?:user )?(?:sending )?(?:limit|quota) exceeded")),
    # Gmail: 454 4.7.0 Too many login attempts - a login throttle, not a bad password.
    _Rule(R, text=_re(r"too many login attempts")),
    # Gmail 530 5.7.0 Authentication Required, 534 5.7.9 Application-specific password required,
    # 535 5.7.8 Username and Password not accepted; Microsoft 535 5.7.3 / 5.7.139 Authentication unsuccessful,
    # 530 5.7.57 Client not authenticated; Yahoo 535 5.7.0 (#AUTH005) Too many bad auth attempts.
    _Rule(A, codes=frozenset({530, 534, 535})),
    _Rule(A, enhanced=frozenset({"5.7.8", "5.7.139", "5.7.57"})),
    _Rule(A, text=_re(r"authentication (?:unsuccessful|failed|required)|username and password not accepted|"
                      r"#auth\d+")),
    # Gmail: 421 4.7.28 / 550 5.7.28 unusual rate of unsolicited mail; 421 4.7.0 try again later.
    _Rule(R, enhanced=frozenset({"4.7.28", "5.7.28"})),
    _Rule(R, text=_re(r"unusual rate|rate limit|temporarily rate limited|too many (?:messages|connections)|"
                      r"\[TS[S0-9]\d*\]|deferred due to (?:unexpected volume|user complaints)")),
    _Rule(R, codes=frozenset({421}), enhanced=frozenset({"4.7.0"})),
    # Microsoft: 451 4.7.500-699 Server busy / access denied, please try again later (throttling of the sender).
    _Rule(R, codes=frozenset({421, 450, 451, 452}), text=_re(r"server busy")),
    # Recipient: Gmail 550 5.1.1 does not exist, 550 5.2.1 account disabled, 552 5.2.2 over quota;
    # Microsoft 550 5.1.10 RecipientNotFound; Yahoo 554 delivery error: dd This user doesn't have a ... account.
    _Rule(P, enhanced=frozenset({"5.1.1", "5.1.10", "5.1.0", "5.1.3", "5.1.6", "5.2.1", "5.2.2", "5.0.350"})),
    _Rule(P, codes=frozenset(range(500, 600)),
          text=_re(r"user unknown|no such user|does not exist|recipientnotfound|doesn't have a [\w.]+ account|"
                   r"unknown recipient|recipient (?:address )?rejected")),
    # Content and policy: Gmail 550 5.7.1 unsolicited/policy, 552 5.7.0 security issue, 550 5.7.26 unauthenticated
    # sender (DMARC), 552 5.3.4 size; Microsoft 550 5.7.1 block list (S3150), 550 5.7.708; Yahoo 554 5.7.9 policy,
    # 553 5.7.1 [BL21] Spamhaus.
    _Rule(C, codes=frozenset(range(500, 600)),
          enhanced=frozenset({"5.7.0", "5.7.1", "5.7.9", "5.7.25", "5.7.26", "5.7.27", "5.7.708", "5.3.4"})),
    _Rule(C, codes=frozenset(range(500, 600)), text=_re(r"spam|policy|block ?list|blocked|spamhaus")),
)

_ENHANCED_RE = re.compile(r"\b([245])\.(\d{1,3})\.(\d{1,3})\b")


def classify(code: int | None, enhanced_code: str | None, text: str = "") -> FailureClass:
    """The class of a failed send from its SMTP reply code, enhanced status code and text.

    `code` None means no reply at all (connection refused or timed out): transient. When `enhanced_code` is
    None it is read from the start of `text` if present. An unknown 4xx is transient; an unknown 5xx is
    `content` (the job fails) because retrying an unexplained permanent rejection blindly burns reputation.
    """
    text = text or ""
    enhanced = (enhanced_code or "").strip()
    if not enhanced:
        found = _ENHANCED_RE.search(text[:40])
        enhanced = found.group(0) if found else ""
    if code is None:
        return FailureClass.TRANSIENT
    for rule in RULES:
        if rule.matches(code, enhanced, text):
            return rule.cls
    if 400 <= code < 500:
        return FailureClass.TRANSIENT
    if 500 <= code < 600:
        return FailureClass.CONTENT
    raise ValueError(f"SMTP reply code {code} is not a failure (expected 4xx or 5xx)")


def split_reply(reply: str) -> tuple[int | None, str | None, str]:
    """`'550 5.1.1 The email account ...'` -> (550, '5.1.1', 'The email account ...'); for CLI input."""
    match = re.match(r"\s*(\d{3})[ -]?(?:([245]\.\d{1,3}\.\d{1,3})\s*)?(.*)", reply, re.DOTALL)
    if not match:
        return None, None, reply.strip()
    return int(match.group(1)), match.group(2), match.group(3).strip()
