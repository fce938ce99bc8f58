"""What a message in a sending mailbox's inbox is: a bounce (hard or soft), a spam complaint, an automatic reply,
an unsubscribe request, or a person's reply; and which of our messages it is about.

Bounces are detected by `flufl.bounce` (RFC 3464 DSNs and the formats of Exim, qmail, Postfix, Microsoft, Yahoo,
AOL...); a DSN's Status and Diagnostic-Code are classified by `warmup.classify_bounce`: only an address that does
not exist (class `recipient`) is a hard bounce that suppresses it; a policy or quota refusal is noted as soft.
"""

from __future__ import annotations

import email
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from email.message import Message
from email.utils import parseaddr
from enum import StrEnum

from flufl.bounce import all_failures

from warmup import FailureClass
from warmup.failures import classify_bounce

log = logging.getLogger("sendhost.sender.inbox")

# RFC 3834 and what the big providers add to out-of-office replies.
_AUTO_HEADERS = ("x-autoreply", "x-autorespond", "x-autoresponse", "x-auto-response-suppress")
_AUTO_PRECEDENCE = ("auto_reply", "auto-reply", "bulk", "junk")
_AUTO_SUBJECT = re.compile(r"^\s*(automatic reply|auto(matic)?[- ]?reply|out of (the )?office|autoreply|"
                           r"abwesenheitsnotiz|r[ée]ponse automatique|respuesta autom[áa]tica|auto:)", re.IGNORECASE)
_UNSUBSCRIBE_SUBJECT = re.compile(r"^\s*(re:\s*)?unsubscribe\s*$", re.IGNORECASE)
_MESSAGE_ID = re.compile(r"<[^<>\s@]+@[^<>\s@]+>")


class MessageKind(StrEnum):
    HARD_BOUNCE = "hard_bounce"
    SOFT_BOUNCE = "soft_bounce"
    COMPLAINT = "complaint"
    AUTO_REPLY = "auto_reply"
    UNSUBSCRIBE = "unsubscribe"
    REPLY = "reply"
    MALFORMED = "malformed"  # a bounce or report we cannot read: counted, nothing changed


@dataclass(frozen=True)
class Parsed:
    kind: MessageKind
    own_message_id: str | None  # the feedback message's own Message-ID (a stable replay reference)
    sender: str  # the From address, lower case ('' when none)
    # Message-IDs this message is about, most trustworthy first: the returned message or headers part, then
    # In-Reply-To and References.
    about: tuple[str, ...] = ()
    # Message-ID-shaped tokens in the text (a provider that quotes the original inline): used only when exactly
    # one of them names a row.
    quoted: tuple[str, ...] = ()
    detail: str = ""
    recipients: frozenset[str] = field(default_factory=frozenset)


def parse(raw: bytes) -> Parsed:
    """Classify one raw message. Never raises on bad input: an unreadable bounce is MALFORMED."""
    try:
        message = email.message_from_bytes(raw)
    except Exception as exc:  # the parser is lenient; this is belt and braces
        return Parsed(MessageKind.MALFORMED, None, "", detail=f"unparseable: {exc}")
    own = _one_id(message.get("Message-ID", ""))
    sender = parseaddr(str(message.get("From", "")))[1].lower()
    threaded = _ids(message.get_all("In-Reply-To", []) + message.get_all("References", []))
    if _is_complaint(message):
        returned = _returned_ids(message)
        return Parsed(MessageKind.COMPLAINT, own, sender, about=returned, quoted=_quoted(message), detail="ARF report")
    try:
        temporary, permanent = all_failures(message)
    except Exception as exc:  # a detector choking on a malformed part
        log.warning("inbox: bounce detectors failed on %s: %s", own or "a message without Message-ID", exc)
        return Parsed(MessageKind.MALFORMED, own, sender, detail=f"bounce detectors failed: {type(exc).__name__}")
    if temporary or permanent or _is_report(message):
        about = _returned_ids(message) + threaded
        quoted = _quoted(message)
        status, diagnostic = _delivery_status(message)
        recipients = frozenset(a.decode("ascii", "replace").lower() for a in permanent | temporary)
        if not (temporary or permanent or status):
            return Parsed(MessageKind.MALFORMED, own, sender, about, quoted, "a delivery report naming no failure")
        kind = MessageKind.HARD_BOUNCE if permanent else MessageKind.SOFT_BOUNCE
        detail = f"{status} {diagnostic}".strip() or (
            "permanent failure (no DSN status)" if permanent else "temporary failure (no DSN status)")
        if status:
            try:
                failure = classify_bounce(status, diagnostic)
            except ValueError:  # a 2.x.x status: a delivery, not a failure
                return Parsed(MessageKind.MALFORMED, own, sender, about, quoted, f"not a failure: {detail}")
            # Only an address that does not exist is a hard bounce; a refusal for policy, content or quota says
            # nothing against the address, so it is noted as soft and never suppresses.
            kind = MessageKind.HARD_BOUNCE if failure is FailureClass.RECIPIENT and status.startswith("5") else \
                MessageKind.SOFT_BOUNCE
            detail = f"{failure}: {detail}"
        return Parsed(kind, own, sender, about, quoted, detail[:300], recipients)
    if _is_auto_reply(message):
        return Parsed(MessageKind.AUTO_REPLY, own, sender, threaded, detail=str(message.get("Subject", ""))[:200])
    if _UNSUBSCRIBE_SUBJECT.match(str(message.get("Subject", ""))):
        return Parsed(MessageKind.UNSUBSCRIBE, own, sender, threaded, detail="unsubscribe by mail")
    return Parsed(MessageKind.REPLY, own, sender, threaded, detail=str(message.get("Subject", ""))[:200])


def _one_id(value: object) -> str | None:
    found = _MESSAGE_ID.findall(str(value or ""))
    return found[0] if found else None


def _ids(values: Sequence[object]) -> tuple[str, ...]:
    seen: list[str] = []
    for value in values:
        for found in _MESSAGE_ID.findall(str(value)):
            if found not in seen:
                seen.append(found)
    # References lists the oldest first; the most recent message is the likeliest ours.
    return tuple(seen)


def _is_report(message: Message) -> bool:
    return message.get_content_type() == "multipart/report" and \
        message.get_param("report-type", "").lower() == "delivery-status"  # type: ignore[union-attr]


def _is_complaint(message: Message) -> bool:
    if message.get_content_type() != "multipart/report":
        return False
    if str(message.get_param("report-type", "")).lower() != "feedback-report":
        return False
    for part in message.walk():
        if part.get_content_type() == "message/feedback-report":
            text = _text_of(part).lower()
            return "feedback-type: abuse" in text or "feedback-type:abuse" in text
    return False


def _text_of(part: Message) -> str:
    payload = part.get_payload()
    if isinstance(payload, list):  # message/* parts: their header blocks
        return "\n".join(str(p) for p in payload)
    data = part.get_payload(decode=True)
    if isinstance(data, bytes):
        return data.decode(part.get_content_charset() or "utf-8", "replace")
    return str(payload)


def _returned_ids(message: Message) -> tuple[str, ...]:
    """The Message-ID of the returned message (message/rfc822) or headers (text/rfc822-headers)."""
    found: list[str] = []
    for part in message.walk():
        kind = part.get_content_type()
        if kind == "message/rfc822":
            inner = part.get_payload()
            if isinstance(inner, list) and inner and isinstance(inner[0], Message):
                value = _one_id(inner[0].get("Message-ID", ""))
                if value:
                    found.append(value)
        elif kind == "text/rfc822-headers":
            headers = email.message_from_string(_text_of(part))
            value = _one_id(headers.get("Message-ID", ""))
            if value:
                found.append(value)
    return tuple(dict.fromkeys(found))


def _quoted(message: Message) -> tuple[str, ...]:
    own = _one_id(message.get("Message-ID", ""))
    found: list[str] = []
    for part in message.walk():
        if part.get_content_maintype() == "text":
            for match in re.finditer(r"message-id:\s*(<[^<>\s@]+@[^<>\s@]+>)", _text_of(part), re.IGNORECASE):
                if match.group(1) != own and match.group(1) not in found:
                    found.append(match.group(1))
    return tuple(found)


def _delivery_status(message: Message) -> tuple[str, str]:
    """The first failed recipient's Status and Diagnostic-Code of a DSN ('' when it has none)."""
    for part in message.walk():
        if part.get_content_type() != "message/delivery-status":
            continue
        blocks = part.get_payload()
        if not isinstance(blocks, list):
            continue
        for block in blocks[1:] or blocks:
            if not isinstance(block, Message):
                continue
            status = str(block.get("Status", "")).split()[0] if block.get("Status") else ""
            if status and status[0] in "45":
                return status, " ".join(str(block.get("Diagnostic-Code", "")).split())
    return "", ""


def _is_auto_reply(message: Message) -> bool:
    auto = str(message.get("Auto-Submitted", "")).strip().lower()
    if auto and auto != "no":
        return True
    if any(message.get(h) for h in _AUTO_HEADERS):
        return True
    if str(message.get("Precedence", "")).strip().lower() in _AUTO_PRECEDENCE:
        return True
    return bool(_AUTO_SUBJECT.match(str(message.get("Subject", ""))))

