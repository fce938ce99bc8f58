"""What a message in a sending mailbox's inbox is: a bounce (hard or soft), a spam complaint, an automatic reply,
an unsubscribe request, or a person's reply; which of our messages it is about; and how sure its From is.

Bounces are detected by `flufl.bounce` (RFC 3464 DSNs and the formats of Exim, qmail, Postfix, Microsoft, Yahoo,
AOL...) and, before any reply verdict, by `is_bounce` (vendor delivery-status types, mail from a mailer-daemon or
postmaster, a text quoting a Message-ID beside failure words); a DSN's Status and Diagnostic-Code are classified
by `warmup.failures.explain_bounce`: only an address that does not exist (class `recipient`, but a full mailbox)
is a hard bounce that suppresses it; a policy or quota refusal and a full mailbox are noted as soft.

Every message is a stranger's: it is read within the bounds of sender.feedback.mime (bytes, parts, depth, IDs), and
`parse` never raises: what cannot be read is MALFORMED, with the reason.
"""

from __future__ import annotations

import email
import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from email.message import Message
from email.utils import getaddresses, parseaddr
from enum import StrEnum

from flufl.bounce import all_failures

from sender.addresses import AddressError, canonical
from sender.feedback import mime
from sender.feedback.authentication import dmarc_verdict
from sender.ledger.events import Verdict
from warmup import FailureClass
from warmup.failure_texts import DOMAIN_MISSING, MAILBOX_FULL, RECIPIENT_GONE
from warmup.failures import SmtpStage, explain_bounce

log = logging.getLogger("sendhost.sender.inbox")

# RFC 3834 and what the big providers add to out-of-office replies.
_AUTO_HEADERS = ("x-autoreply", "x-autorespond", "x-autoresponse", "x-auto-response-suppress")
_AUTO_PRECEDENCE = ("auto_reply", "auto-reply", "bulk", "junk")
_AUTO_SUBJECT = re.compile(r"^\s*(automatic reply|auto(matic)?[- ]?reply|out of (the )?office|autoreply|"
                           r"abwesenheitsnotiz|r[ée]ponse automatique|respuesta autom[áa]tica|auto:)", re.IGNORECASE)
_UNSUBSCRIBE_SUBJECT = re.compile(r"^\s*(re:\s*)?unsubscribe\s*$", re.IGNORECASE)
_QUOTED_ID = re.compile(r"message-id:\s*(" + mime.MESSAGE_ID.pattern + ")", re.IGNORECASE)
MAX_RECIPIENTS = 16  # a bounce of one of our messages names one recipient; a DSN naming more is about others
# The delivery-status part's types: RFC 3464's, RFC 6533's (internationalized) and the vendor `x` spelling some
# MTAs write. Python's email package parses only the first into blocks; the others are split here.
DSN_TYPES = frozenset({"message/delivery-status", "message/global-delivery-status", "message/xdelivery-status"})
_REPORT_TYPES = frozenset({"delivery-status", "global-delivery-status", "xdelivery-status"})
# Who sends bounces (RFC 5321 4.5.1 postmaster, RFC 3464's MTA): mail from them is a report, never a lead's reply.
# (An address without a domain too: "MAILER-DAEMON" alone, as some MTAs write it.)
_DAEMON_ADDRESS = re.compile(r"^(?:mailer[-_ ]?daemon|mail-?daemon|post_?master)(?:@|$)", re.IGNORECASE)
_DAEMON_NAME = re.compile(r"^\W{0,3}(?:mail deliver(?:y)? (?:system|subsystem)|mailer[- ]daemon|post_?master)\b",
                          re.IGNORECASE)
# The subjects MTAs give their reports, at the start (a person's reply starts "Re:", and is read by its words).
FAILURE_SUBJECT = re.compile(
    r"^\s*(?:undeliverable|undelivered mail|returned mail|mail delivery failed|delivery status notification "
    r"\(failure\)|failure notice|delivery failure|non remis|unzustellbar|no se pudo entregar|niet bezorgd)\b",
    re.IGNORECASE)
# A report's words that a delivery failed, as Exchange, Domino, GroupWise, qmail, Exim, Sendmail and Postfix write
# them, in the languages their servers are localised to. Bounded: literal alternatives, no nested repetition.
FAILURE_WORDS = re.compile(
    r"undeliverable|undelivered|could not be delivered|couldn't be delivered|delivery (?:has )?failed|"
    r"delivery status notification \(failure\)|wasn't able to deliver|was not delivered|permanent (?:fatal )?error|"
    r"returned mail|message status - undeliverable|delivery failure|mail delivery failed|failure notice|"
    r"user not found|error delivering (?:your )?(?:mail|message)|"
    r"unzustellbar|nicht zugestellt|non remis|non distribuable|no se pudo entregar|"
    r"no entregado|non consegnat|niet bezorgd|onbestelbaar|n[ãa]o (?:foi )?entregue|"
    r"pas pu (?:être|etre) (?:remis|distribu)",
    re.IGNORECASE)
# A reply code quoted in a report's text stands alone: not inside a word, an encoded line, an identifier or a
# telephone number ("(480) 624-2500", "480-624-2500").
_TEXT_REPLY = re.compile(r"(?<![\w.(/+=-])([45])\d\d(?=[ \t-]|$)(?!-\d{3}-\d)(?:[ -]+#?([245]\.\d{1,3}\.\d{1,3}))?"
                         r"(?![\d.)])", re.MULTILINE)
# qmail states the enhanced code of a failure it reports in words: "... no mailbox here by that name. (#5.1.1)".
_QMAIL_CODE = re.compile(r"\(#([45]\.\d{1,3}\.\d{1,3})\)")
# A report that the message is still queued (a delay warning, RFC 3464 Action: delayed in words): temporary.
DELAY_WORDS = re.compile(r"not yet been delivered|delivery attempts will continue|"
                         r"will (?:continue|keep) (?:trying|to try)|still (?:trying|being retried)|has been delayed|"
                         r"delivery (?:is |has been )?delayed",
                         re.IGNORECASE)


class MessageKind(StrEnum):
    HARD_BOUNCE = "hard_bounce"
    SOFT_BOUNCE = "soft_bounce"
    COMPLAINT = "complaint"
    AUTO_REPLY = "auto_reply"
    UNSUBSCRIBE = "unsubscribe"
    REPLY = "reply"
    MALFORMED = "malformed"  # a message or report we cannot read: counted, nothing changed


@dataclass(frozen=True)
class Parsed:
    kind: MessageKind
    own_message_id: str | None  # the feedback message's own Message-ID (a stable replay reference)
    sender: str  # the From address in canonical form ('' when none, or not one plain address)
    # Message-IDs this message is about, most trustworthy first: the returned message or headers part, then
    # In-Reply-To and References.
    about: tuple[str, ...] = ()
    # Message-ID-shaped tokens in the text (a provider that quotes the original inline): used only when exactly
    # one of them names a row.
    quoted: tuple[str, ...] = ()
    detail: str = ""
    # the addresses a bounce says failed (canonical; flufl.bounce's and the DSN's Final-Recipient fields)
    recipients: frozenset[str] = field(default_factory=frozenset)
    # the mailbox provider's DMARC verdict on the From domain (sender.feedback.authentication)
    verdict: Verdict = Verdict.NONE
    # a bounce's DSN Status (or the one its text implies: "5.0.0") and its class, when it has one
    status: str = ""
    failure: FailureClass | None = None


def parse(raw: bytes, authserv_id: str | None = None) -> Parsed:
    """Classify one raw message (at most mime.MAX_BYTES of it are read); `authserv_id` is the provider's, whose
    Authentication-Results alone are believed. Never raises on bad input: what cannot be read is MALFORMED."""
    try:
        mime.check_structure(raw[:mime.MAX_BYTES])
        message = email.message_from_bytes(raw[:mime.MAX_BYTES])
        mime.parts(message)  # refuses, before any detector walks it, what no real bounce or reply looks like
        mime.trim(message)
        return _classify(message, authserv_id)
    except mime.TooComplex as exc:
        return Parsed(MessageKind.MALFORMED, None, "", detail=f"unreadable: {exc}")
    except Exception as exc:  # whatever else a stranger's bytes make the email package or a detector do
        log.warning("inbox: a message could not be read: %s: %s", type(exc).__name__, exc)
        return Parsed(MessageKind.MALFORMED, None, "", detail=f"unreadable: {type(exc).__name__}")


def _classify(message: Message, authserv_id: str | None) -> Parsed:
    own = _one_id(mime.header(message, "Message-ID"))
    sender = _address(mime.header(message, "From"))
    verdict = dmarc_verdict(message, authserv_id, sender.rpartition("@")[2] or _from_domain(message))
    threaded = mime.message_ids(mime.headers(message, "In-Reply-To") + mime.headers(message, "References"))
    if _is_complaint(message):
        returned = _returned_ids(message)
        return Parsed(MessageKind.COMPLAINT, own, sender, about=returned, quoted=_quoted(message, own),
                      detail="ARF report", verdict=verdict)
    try:
        temporary, permanent = all_failures(message)
    except Exception as exc:
        # A detector choking on the message: flufl.bounce's expect ASCII headers (raw UTF-8 in a From, as a
        # person's client may send, makes one fail). A report we cannot read is malformed; anything else is read
        # as the mail it looks like (a reply, an auto-reply, an unsubscribe).
        if is_bounce(message):
            log.warning("inbox: bounce detectors failed on %s: %s", own or "a message without Message-ID", exc)
            return Parsed(MessageKind.MALFORMED, own, sender,
                          detail=f"bounce detectors failed: {type(exc).__name__}")
        temporary = permanent = frozenset()
    if temporary or permanent or is_bounce(message):
        about = mime.message_ids(_returned_ids(message) + threaded)
        quoted = _quoted(message, own)
        status, diagnostic, report_text, stage = failure_fields(message)
        recipients = _recipients(message, permanent | temporary)
        if not (temporary or permanent or status):
            return Parsed(MessageKind.MALFORMED, own, sender, about, quoted, "a delivery report naming no failure")
        kind = MessageKind.HARD_BOUNCE if permanent else MessageKind.SOFT_BOUNCE
        failure: FailureClass | None = None
        detail = f"{status} {diagnostic}".strip() or (
            "permanent failure (no DSN status)" if permanent else "temporary failure (no DSN status)")
        if not status:
            # A detector's verdict says only that the failure is final or not: why is in the report's words, read as
            # any text report's are; with none that name the address gone, it is no reason to suppress it.
            status, report_text = ("5.0.0" if permanent else "4.0.0"), _report_words(message) or detail
        if status:
            try:
                verdict_of = explain_bounce(status, diagnostic, report_text, stage)
            except ValueError:  # a 2.x.x status: a delivery, not a failure
                return Parsed(MessageKind.MALFORMED, own, sender, about, quoted, f"not a failure: {detail}"[:300])
            failure = verdict_of.failure
            # Only an address that does not exist is a hard bounce; a refusal for policy, content or quota says
            # nothing against the address, and a full mailbox can be emptied: noted as soft, never suppressed.
            gone = failure is FailureClass.RECIPIENT and verdict_of.rule != "mailbox_full"
            # Final: a permanent Status, or RFC 3464's `Action: failed` (the MTA makes no further attempt) whatever
            # class the Status carries (Gmail reports an NXDOMAIN it gave up on as 4.0.0).
            final = status.startswith("5") or _delivery_action(message) == "failed"
            kind = MessageKind.HARD_BOUNCE if gone and final else MessageKind.SOFT_BOUNCE
            detail = f"{failure}: {detail}"
        return Parsed(kind, own, sender, about, quoted, detail[:300], recipients, verdict, status, failure)
    subject = mime.header(message, "Subject")
    if _is_auto_reply(message, subject):
        return Parsed(MessageKind.AUTO_REPLY, own, sender, threaded, detail=subject[:200], verdict=verdict)
    if _UNSUBSCRIBE_SUBJECT.match(subject):
        return Parsed(MessageKind.UNSUBSCRIBE, own, sender, threaded, detail="unsubscribe by mail", verdict=verdict)
    return Parsed(MessageKind.REPLY, own, sender, threaded, detail=subject[:200], verdict=verdict)


def _address(value: str) -> str:
    """The From's address in canonical form, or '' when it is not one plain address."""
    try:
        return canonical(parseaddr(value)[1])
    except AddressError:
        return ""


def _from_domain(message: Message) -> str:
    """The From's domain even when the address is not one we could mail (DMARC is about the domain alone)."""
    found = getaddresses([mime.header(message, "From")])
    return found[0][1].rpartition("@")[2].lower() if found else ""


def _recipients(message: Message, failed: Iterable[bytes]) -> frozenset[str]:
    """The failed recipients a bounce names: flufl.bounce's, and each DSN block's Final- and Original-Recipient."""
    found: set[str] = set()
    for address in failed:
        found.add(address.decode("ascii", "replace"))
    for part in mime.parts(message):
        if part.get_content_type() not in DSN_TYPES:
            continue
        for block in _status_blocks(part)[1:mime.MAX_PARTS]:
            if isinstance(block, Message):
                for name in ("Final-Recipient", "Original-Recipient"):
                    value = mime.header(block, name)
                    found.add(value.partition(";")[2] if ";" in value else value)
    clean = {_address(a.strip()) for a in list(found)[:MAX_RECIPIENTS * 2]}
    return frozenset(sorted(a for a in clean if a)[:MAX_RECIPIENTS])


def _one_id(value: str) -> str | None:
    found = mime.message_ids([value], 1)
    return found[0] if found else None


def _report_type(message: Message) -> str:
    value = message.get_param("report-type", "")
    value = value[2] if isinstance(value, tuple) else value  # an RFC 2231 parameter: (charset, language, value)
    return str(value or "").lower()


def _is_report(message: Message) -> bool:
    return message.get_content_type() == "multipart/report" and _report_type(message) in _REPORT_TYPES


def _status_blocks(part: Message) -> list[Message]:
    """The field blocks of a delivery-status part: the per-message block first, then one per recipient."""
    payload = part.get_payload()
    if part.get_content_type() == "message/delivery-status" and isinstance(payload, list):
        return [block for block in payload[:mime.MAX_PARTS + 1] if isinstance(block, Message)]
    # Another type is parsed as one message whose body is the other blocks: read it again as text.
    text = mime.text_of(part)
    chunks = re.split(r"\r?\n[ \t]*\r?\n", text, maxsplit=mime.MAX_PARTS)
    return [email.message_from_string(chunk.strip() + "\n") for chunk in chunks if chunk.strip()]


def is_bounce(message: Message) -> bool:
    """Is this mail a delivery report, whatever its format, so that no reply logic may read it? A DSN, mail from
    a mailer-daemon or postmaster, or a text that quotes a Message-ID header beside a failure phrase (a report of
    a format no detector knows). The inbox's reply verdicts come after this says no."""
    if _is_report(message) or any(p.get_content_type() in DSN_TYPES for p in mime.parts(message)):
        return True
    name, address = parseaddr(mime.header(message, "From"))
    subject = mime.header(message, "Subject")
    if _DAEMON_ADDRESS.match(address) or _DAEMON_NAME.match(name) or FAILURE_SUBJECT.match(subject):
        return True
    text = _body_text(message)
    return bool(_QUOTED_ID.search(text) and (FAILURE_WORDS.search(text) or FAILURE_WORDS.search(subject)))


def _body_text(message: Message) -> str:
    """The first text/plain part (the message itself when it is one), at most 2,000 characters."""
    for part in mime.parts(message):
        if part.get_content_type() == "text/plain":
            return mime.clean(mime.text_of(part), 2000)
    return ""


def _report_words(message: Message) -> str:
    """A report's text parts and delivery-status parts, in order, at most 2,000 characters in all; a multipart whose
    body has none of its boundaries (a relay that dropped them) is read as the text it is."""
    found: list[str] = []
    for part in mime.parts(message):
        unsplit = part.get_content_maintype() == "multipart" and isinstance(part.get_payload(), str)
        if unsplit or part.get_content_type() == "text/plain" or part.get_content_type() in DSN_TYPES:
            found.append(mime.clean(mime.text_of(part) if not unsplit else part.get_payload(), 2000))
        if sum(len(text) for text in found) >= 2000:
            break
    return " ".join(found)[:2000]


def _is_complaint(message: Message) -> bool:
    if message.get_content_type() != "multipart/report" or _report_type(message) != "feedback-report":
        return False
    for part in mime.parts(message):
        if part.get_content_type() == "message/feedback-report":
            text = mime.text_of(part).lower()
            return "feedback-type: abuse" in text or "feedback-type:abuse" in text
    return False


def _returned_ids(message: Message) -> tuple[str, ...]:
    """The Message-ID of the returned message (message/rfc822) or headers (text/rfc822-headers)."""
    found: list[str] = []
    for part in mime.parts(message):
        kind = part.get_content_type()
        if kind == "message/rfc822":
            inner = part.get_payload()
            if isinstance(inner, list) and inner and isinstance(inner[0], Message):
                value = _one_id(mime.header(inner[0], "Message-ID"))
                if value:
                    found.append(value)
        elif kind == "text/rfc822-headers":
            value = _one_id(mime.header(email.message_from_string(mime.text_of(part)), "Message-ID"))
            if value:
                found.append(value)
    return mime.message_ids(found)


def _quoted(message: Message, own: str | None) -> tuple[str, ...]:
    found: dict[str, None] = {}
    for part in mime.parts(message):
        if part.get_content_maintype() != "text":
            continue
        for match in _QUOTED_ID.finditer(mime.text_of(part)):
            if match.group(1) != own:
                found.setdefault(match.group(1), None)
                if len(found) >= mime.MAX_IDS:
                    return tuple(found)
    return tuple(found)


# Where the remote server refused, as the relay's report says it: Postfix's "(in reply to end of DATA command)",
# Exim's "SMTP error from remote mail server after end of data". The DSN's own fields never say it.
_AFTER_END_OF_DATA = re.compile(r"(?:in\s+reply\s+to|after)\s+end\s+of\s+data\b", re.IGNORECASE)


def failure_fields(message: Message) -> tuple[str, str, str, SmtpStage | None]:
    """What `classify_bounce` reads of a DSN: the first failed recipient's Status and Diagnostic-Code; when there is
    no Diagnostic-Code, the report's human-readable text (its first text part, at most 2,000 characters); and the
    stage that text names: `AFTER_DATA` when the remote server refused after the end of DATA, else None."""
    status, diagnostic = _delivery_status(message)
    if not status:
        # A DSN whose status part cannot be read (cut at mime.MAX_BYTES) stays unread: its prose is not the status.
        # A report that has the returned message but no status part at all (ActiveHunter's) is a text report.
        kinds = {p.get_content_type() for p in mime.parts(message)}
        whole = bool(kinds & {"message/rfc822", "text/rfc822-headers"})
        has_dsn = bool(kinds & DSN_TYPES) or (_is_report(message) and not whole)
        return (status, diagnostic, "", None) if has_dsn else _text_failure(message)
    text = _report_text(message)
    stage = SmtpStage.AFTER_DATA if _AFTER_END_OF_DATA.search(text) else None
    if diagnostic.partition(";")[2].strip() or (";" not in diagnostic and diagnostic):
        return status, diagnostic, "", stage
    return status, diagnostic, text, stage


def _text_failure(message: Message) -> tuple[str, str, str, SmtpStage | None]:
    """A report without a delivery-status part (GroupWise, Domino, Exchange's text NDR, qmail): the reply it quotes,
    else its failure words, read as what the relay said. The Status is the quoted reply's (its enhanced code, else
    its class as X.0.0); a text naming a failure and no code is taken as permanent (5.0.0): a relay reports a
    temporary failure as a delay, with a code. ('' when the text names no failure.)"""
    text = _body_text(message)
    stage = SmtpStage.AFTER_DATA if _AFTER_END_OF_DATA.search(text) else None
    quoted = _TEXT_REPLY.search(text)
    if DELAY_WORDS.search(text):
        return "4.0.0", "", text[quoted.start():] if quoted else text, stage
    if quoted:
        return quoted.group(2) or f"{quoted.group(1)}.0.0", "", text[quoted.start():], stage
    stated = _QMAIL_CODE.search(text)
    if stated:  # a report, not a delay: final whatever class the code carries ("(#4.4.1) I'm not going to try again")
        return "5" + stated.group(1)[1:], "", text, stage
    if any(words.search(text) for words in (FAILURE_WORDS, RECIPIENT_GONE, DOMAIN_MISSING, MAILBOX_FULL)):
        return "5.0.0", "", text, stage
    return "", "", "", None


def _report_text(message: Message) -> str:
    """The report's human-readable text: its first text part before the delivery status, at most 2,000 characters."""
    for part in mime.parts(message)[1:]:
        if part.get_content_type() == "text/plain":
            return mime.clean(mime.text_of(part), 2000)
        if part.get_content_type() in DSN_TYPES:
            break
    return ""


def _delivery_status(message: Message) -> tuple[str, str]:
    """The first failed recipient's Status and Diagnostic-Code of a DSN ('' when it has none)."""
    block = _failed_block(message)
    return ((mime.header(block, "Status").split() or [""])[0], mime.header(block, "Diagnostic-Code")) if block \
        else ("", "")


def _delivery_action(message: Message) -> str:
    """The first failed recipient's Action of a DSN, in lower case ('' when it has none)."""
    block = _failed_block(message)
    return mime.header(block, "Action").strip().lower() if block else ""


def _failed_block(message: Message) -> Message | None:
    """The first recipient block of a DSN whose Status is a failure (4.x.x or 5.x.x)."""
    for part in mime.parts(message):
        if part.get_content_type() not in DSN_TYPES:
            continue
        blocks = _status_blocks(part)
        for block in (blocks[1:] or blocks)[:mime.MAX_PARTS]:
            if not isinstance(block, Message):
                continue
            status = (mime.header(block, "Status").split() or [""])[0]
            if status and status[0] in "45":
                return block
    return None


def _is_auto_reply(message: Message, subject: str) -> bool:
    auto = mime.header(message, "Auto-Submitted").lower()
    if auto and auto != "no":
        return True
    if any(mime.header(message, h) for h in _AUTO_HEADERS):
        return True
    if mime.header(message, "Precedence").lower() in _AUTO_PRECEDENCE:
        return True
    return bool(_AUTO_SUBJECT.match(subject))
