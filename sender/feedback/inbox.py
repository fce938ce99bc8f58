"""The inbox reader: each sending mailbox's new messages over IMAP, into the ledger through the rank guard.

For each message after the mailbox's high-water mark (UIDVALIDITY, last UID, kept in the ledger): classify it
(sender.feedback.bounces), find the row it is about (the returned message's Message-ID, In-Reply-To/References, a single
quoted Message-ID that names a row, or for a reply the last row this mailbox sent to its author), and apply the
event (sender.ledger.events) with the provider's DMARC verdict on its From. A message that matches no row is left
alone and counted; nothing changes on a guess. The mailbox is opened read-only: the reader never changes a flag or
moves a message.

Every message is a stranger's, so none can stop a pass or cost more than a bounded time: at most
`mime.MAX_BYTES` of it are fetched, its Message-IDs are capped and looked up in one query, and a message that
cannot be read, whatever the reason, is counted `malformed` with its UID while the mark moves past it. Only the
ledger failing stops a pass (nothing after the mark is lost: the next pass reads on from there).
"""

from __future__ import annotations

import email
import hashlib
import imaplib
import logging
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from enum import StrEnum

from sender.errors import SenderError
from sender.feedback import mime
from sender.feedback.bounces import MessageKind, Parsed, parse
from sender.feedback.colleagues import colleague_domain
from sender.feedback.imap import ImapFailure, first_line, logged_in, quote
from sender.feedback.reply_kinds import AWAY_DEFAULT, ReplyKind, ReplyReading, classify
from sender.ledger.events import Applied, Event, Feedback, SentRow
from sendhost.model import Mailbox

log = logging.getLogger("sendhost.sender.inbox")

# The event of each kind of message that is not a reply. A reply's or an automatic reply's event is what it says,
# read as a person reads it (read_reply, then reply_event): its kind alone never decides.
EVENT_OF: dict[MessageKind, Event] = {
    MessageKind.HARD_BOUNCE: Event.BOUNCED, MessageKind.SOFT_BOUNCE: Event.DEFERRED,
    MessageKind.COMPLAINT: Event.COMPLAINED, MessageKind.UNSUBSCRIBE: Event.UNSUBSCRIBED,
}


class ReadOutcome(StrEnum):
    """What reading one message did."""

    APPLIED = "applied"  # a new event on its row
    REPLAY = "replay"  # read before: nothing changed
    UNMATCHED = "unmatched"  # about no row of ours: left alone
    MALFORMED = "malformed"  # a message we cannot read: left alone
    FORGED = "forged"  # the provider found its From failing DMARC: recorded on its row, nothing changed


@dataclass
class MailboxReport:
    mailbox: str
    outcomes: Counter[str] = field(default_factory=Counter)  # by ReadOutcome, and by event for applied ones
    error: str | None = None

    def as_dict(self) -> dict[str, object]:
        return {"mailbox": self.mailbox, "outcomes": dict(sorted(self.outcomes.items())), "error": self.error}


class InboxReader:
    def __init__(self, feedback: Feedback, *, env: Mapping[str, str] | None = None, timeout_s: float = 30.0) -> None:
        self._feedback = feedback
        self._env = env
        self._timeout = timeout_s
        self._authserv_id: str | None = None  # the mailbox being read's (its imap.authserv_id)

    def read(self, mailbox: Mailbox) -> MailboxReport:
        """Read `mailbox`'s new messages (in its `imap` settings' folder). An IMAP or configuration failure is
        reported, never raised; the ledger being down raises LedgerUnavailable (the caller retries later: nothing
        was marked read)."""
        report = MailboxReport(mailbox.address)
        account = mailbox.imap
        if account is None:
            return self._failed(report, "no imap settings to read its inbox with; add imap: to the mailbox")
        try:
            with logged_in(account, self._env, self._timeout) as imap:
                status, _ = imap.select(quote(account.folder), readonly=True)
                if status != "OK":
                    return self._failed(report, f"cannot open folder {account.folder!r}")
                uidvalidity = int(imap.response("UIDVALIDITY")[1][0] or 0)
                self._authserv_id = account.authserv_id
                self._read_new(imap, mailbox.address, uidvalidity, report)
        except ImapFailure as exc:
            return self._failed(report, exc.why)
        except (OSError, imaplib.IMAP4.error, ValueError) as exc:
            return self._failed(report, f"IMAP session with {account.host}:{account.port} failed: {first_line(exc)}")
        except SenderError:
            raise  # the ledger: the caller stops the pass (the next one reads on from the mark)
        except Exception as exc:  # anything else is this mailbox's alone: the others are still read
            log.warning("inbox %s: the pass failed", mailbox.address, exc_info=log.isEnabledFor(logging.DEBUG))
            return self._failed(report, f"reading failed: {type(exc).__name__}: {first_line(exc)}")
        return report

    def _read_new(self, imap: imaplib.IMAP4, address: str, uidvalidity: int, report: MailboxReport) -> None:
        mark = self._feedback.inbox_mark(address)
        start = mark[1] + 1 if mark is not None and mark[0] == uidvalidity else 1
        status, data = imap.uid("SEARCH", f"UID {start}:*")
        if status != "OK":
            raise imaplib.IMAP4.error(f"UID SEARCH answered {status}")
        # "n:*" always includes the newest message, even below n: keep only those after the mark.
        uids = sorted(u for u in (int(x) for x in (data[0] or b"").split()) if u >= start)
        for uid in uids:
            # At most MAX_BYTES of each message: a DSN's parts that say what happened come first.
            status, fetched = imap.uid("FETCH", str(uid), f"(BODY.PEEK[]<0.{mime.MAX_BYTES}>)")
            raw = next((item[1] for item in fetched if isinstance(item, tuple)), None) if status == "OK" else None
            if not isinstance(raw, bytes):
                report.outcomes[ReadOutcome.MALFORMED] += 1
                log.warning("inbox %s: UID %d could not be fetched; skipped", address, uid)
            else:
                try:
                    self._one(address, uid, raw, report)
                except SenderError:
                    raise
                except Exception as exc:  # no message content may stop the pass: counted, the mark moves past it
                    report.outcomes[ReadOutcome.MALFORMED] += 1
                    log.warning("inbox %s UID %d: could not be read (%s: %s); left alone", address, uid,
                                type(exc).__name__, exc, exc_info=log.isEnabledFor(logging.DEBUG))
            self._feedback.set_inbox_mark(address, uidvalidity, uid)

    def _one(self, address: str, uid: int, raw: bytes, report: MailboxReport) -> None:
        parsed = parse(raw, self._authserv_id)
        where = f"inbox {address} UID {uid}"
        if parsed.kind is MessageKind.MALFORMED:
            report.outcomes[ReadOutcome.MALFORMED] += 1
            log.warning("%s: %s; left alone", where, parsed.detail)
            return
        found = self._row_of(parsed, address)
        # The message's own Message-ID, else a hash of what was read: the same message is the same reference after
        # a UIDVALIDITY change or a restored mark, whatever UID it has now.
        ref = parsed.own_message_id or "sha256:" + hashlib.sha256(raw[:mime.MAX_BYTES]).hexdigest()
        read = read_reply(raw, parsed, self._today())
        if found is None:
            if read is not None and read.kind in (ReplyKind.PERSON, ReplyKind.LEFT) and \
                    self._colleague(address, parsed, ref, report, where):
                return
            report.outcomes[ReadOutcome.UNMATCHED] += 1
            log.info("%s: a %s about no row of ours; left alone", where, parsed.kind)
            return
        row, row_address = found
        event, detail = event_of(parsed, read)
        if parsed.kind in (MessageKind.HARD_BOUNCE, MessageKind.SOFT_BOUNCE) and row_address is not None:
            if parsed.recipients and row_address not in parsed.recipients:
                # The bounce names other addresses than the row's: it is not about this row after all.
                report.outcomes[ReadOutcome.UNMATCHED] += 1
                log.warning("%s: a %s naming row %d but not its address; left alone", where, parsed.kind, row)
                return
            if event is Event.BOUNCED and not parsed.recipients:
                # A hard bounce suppresses the address and counts against the mailbox: it must say whom it is
                # about. One that names nobody is noted on the row, as a soft one.
                event, detail = Event.DEFERRED, f"a permanent failure naming no recipient: {detail}"
        applied = self._feedback.apply(row, event, source="inbox", ref=ref, detail=mime.clean(detail, 500),
                                       verdict=parsed.verdict)
        if applied is Applied.REPLAY:
            report.outcomes[ReadOutcome.REPLAY] += 1
        elif applied is Applied.FORGED:
            report.outcomes[ReadOutcome.FORGED] += 1
            log.warning("%s: a %s on row %d whose From fails DMARC at the provider: recorded, nothing changed",
                        where, parsed.kind, row)
            return
        if read is not None and read.kind is ReplyKind.AUTOMATIC and read.hold_until is not None:
            # Again on a replay (idempotent): a pass that stopped between the two calls still holds the lead.
            held = self._feedback.hold(row, read.hold_until, hold_why(read))
            if held:
                log.info("%s: row %d's lead held until %s (%d row(s))", where, row, read.hold_until, held)
        if applied is Applied.REPLAY:
            return
        report.outcomes[ReadOutcome.APPLIED] += 1
        report.outcomes[event.value] += 1
        log.info("%s: %s on row %d (%s, DMARC %s)", where, event, row, applied, parsed.verdict)

    def _colleague(self, address: str, parsed: Parsed, ref: str, report: MailboxReport, where: str) -> bool:
        """A reply naming no row, from an address at a company's domain: the lead there this mailbox mailed last
        ends as `colleague_replied` when its campaign says `stop_on_domain_reply` (the ledger decides). Whether it
        was applied (or was a replay, or forged): else the message is left alone."""
        if not parsed.sender or parsed.sender == address.lower() or colleague_domain(parsed.sender) is None:
            return False
        row, applied = self._feedback.colleague_reply(address, parsed.sender, ref=ref,
                                                      detail=f"{parsed.sender} replied", verdict=parsed.verdict)
        if applied is Applied.NO_ROW or row is None:
            return False
        if applied is Applied.REPLAY:
            report.outcomes[ReadOutcome.REPLAY] += 1
        elif applied is Applied.FORGED:
            report.outcomes[ReadOutcome.FORGED] += 1
            log.warning("%s: a colleague's reply to row %d whose From fails DMARC at the provider: recorded, "
                        "nothing changed", where, row)
        else:
            report.outcomes[ReadOutcome.APPLIED] += 1
            report.outcomes[Event.COLLEAGUE_REPLIED.value] += 1
            log.info("%s: %s, a colleague at the lead's domain, replied: row %d's sequence ended", where,
                     parsed.sender, row)
        return True

    def _today(self) -> date:
        """The ledger clock's day (a simulation's or a test's), from which a return date's year is read."""
        return (self._feedback.ledger.now() or datetime.now(UTC)).date()

    def _row_of(self, parsed: Parsed, address: str) -> tuple[int, str | None] | None:
        """(row, its address) of the row `parsed` is about, with one lookup of its Message-IDs (capped by the
        parser); for a reply, auto-reply or unsubscribe mail that names none, the last row sent to its author."""
        rows: dict[str, SentRow] = self._feedback.rows_of(parsed.about + parsed.quoted)
        for message_id in parsed.about:
            if message_id in rows:
                return rows[message_id].id, rows[message_id].address
        named = {rows[m].id: rows[m].address for m in parsed.quoted if m in rows}
        if len(named) == 1:
            return next(iter(named.items()))
        if parsed.kind in (MessageKind.REPLY, MessageKind.AUTO_REPLY, MessageKind.UNSUBSCRIBE) and parsed.sender and \
                parsed.sender != address.lower():
            row = self._feedback.latest_row_to(parsed.sender, address)
            return None if row is None else (row, None)
        return None

    def _failed(self, report: MailboxReport, why: str) -> MailboxReport:
        log.error("inbox %s: %s", report.mailbox, why)
        report.error = why
        return report


def read_reply(raw: bytes, parsed: Parsed, today: date) -> ReplyReading | None:
    """A reply or an automatic reply as a person reads it (sender.feedback.reply_kinds): its Subject and the newest
    part of its text body; None for any other kind of message. `today` is the day it is read, from which a return
    date's year and the hold are counted."""
    if parsed.kind not in (MessageKind.REPLY, MessageKind.AUTO_REPLY):
        return None
    message = email.message_from_bytes(raw[:mime.MAX_BYTES])
    body = next((mime.text_of(part) for part in mime.parts(message) if part.get_content_type() == "text/plain"), "")
    return classify(mime.header(message, "Subject"), body, automatic=parsed.kind is MessageKind.AUTO_REPLY,
                    received=today, sender=parsed.sender or "")


def event_of(parsed: Parsed, read: ReplyReading | None) -> tuple[Event, str]:
    """The event a message is, and its detail: a reply's (`read`, from read_reply) its reading's, any other's its
    kind's."""
    return reply_event(read, parsed) if read is not None else (EVENT_OF[parsed.kind], parsed.detail)


def reply_event(read: ReplyReading, parsed: Parsed) -> tuple[Event, str]:
    """The event a reply's verdict is: one asking us to stop is an unsubscribe (the address is suppressed in this
    pass); one saying the lead left ends the sequence as `left`, naming the addresses it gives (never mailed by
    themselves); an automatic one never ends the sequence (it holds the lead: hold_why); any other is a reply."""
    if read.kind is ReplyKind.STOP:
        return Event.UNSUBSCRIBED, f"asked in a reply ({read.rule})"
    if read.kind is ReplyKind.LEFT:
        named = f"; the reply names {', '.join(read.named)}" if read.named else ""
        return Event.LEFT, f"no longer there or the wrong person ({read.rule}){named}"
    if read.kind is ReplyKind.AUTOMATIC:
        return Event.AUTO_REPLIED, f"{parsed.detail} ({hold_why(read)})"
    return Event.REPLIED, parsed.detail


def hold_why(read: ReplyReading) -> str:
    """Why an automatic reply holds its lead, as `lead show` says it."""
    if read.back_on is not None:
        return f"an automatic reply: back on {read.back_on.isoformat()}"
    return f"an automatic reply naming no return date: held {AWAY_DEFAULT.days} days"


def read_all(feedback: Feedback, mailboxes: list[Mailbox], *, env: Mapping[str, str] | None = None,
             timeout_s: float = 30.0) -> list[MailboxReport]:
    """One pass over every mailbox; a mailbox that fails is reported and the others are still read."""
    reader = InboxReader(feedback, env=env, timeout_s=timeout_s)
    return [reader.read(mailbox) for mailbox in mailboxes]

