"""The inbox reader: each sending mailbox's new messages over IMAP, into the ledger through the rank guard.

For each message after the mailbox's high-water mark (UIDVALIDITY, last UID, kept in the ledger): classify it
(sender.feedback.bounces), find the row it is about (the returned message's Message-ID, In-Reply-To/References, a single
quoted Message-ID that names a row, or for a reply the last row this mailbox sent to its author), and apply the
event (sender.ledger.events). A message that matches no row is left alone and counted; nothing changes on a guess. The
mailbox is opened read-only: the reader never changes a flag or moves a message.
"""

from __future__ import annotations

import imaplib
import logging
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from sender.feedback.bounces import MessageKind, Parsed, parse
from sender.feedback.imap import ImapFailure, first_line, logged_in, quote
from sender.ledger.events import Applied, Event, Feedback
from sendhost.model import Mailbox

log = logging.getLogger("sendhost.sender.inbox")

EVENT_OF: dict[MessageKind, Event] = {
    MessageKind.HARD_BOUNCE: Event.BOUNCED, MessageKind.SOFT_BOUNCE: Event.DEFERRED,
    MessageKind.COMPLAINT: Event.COMPLAINED, MessageKind.AUTO_REPLY: Event.AUTO_REPLIED,
    MessageKind.UNSUBSCRIBE: Event.UNSUBSCRIBED, MessageKind.REPLY: Event.REPLIED,
}


class ReadOutcome(StrEnum):
    """What reading one message did."""

    APPLIED = "applied"  # a new event on its row
    REPLAY = "replay"  # read before: nothing changed
    UNMATCHED = "unmatched"  # about no row of ours: left alone
    MALFORMED = "malformed"  # a bounce or report we cannot read: left alone


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
                self._read_new(imap, mailbox.address, uidvalidity, report)
        except ImapFailure as exc:
            return self._failed(report, exc.why)
        except (OSError, imaplib.IMAP4.error, ValueError) as exc:
            return self._failed(report, f"IMAP session with {account.host}:{account.port} failed: {first_line(exc)}")
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
            status, fetched = imap.uid("FETCH", str(uid), "(BODY.PEEK[])")
            raw = next((item[1] for item in fetched if isinstance(item, tuple)), None) if status == "OK" else None
            if raw is None:
                report.outcomes[ReadOutcome.MALFORMED] += 1
                log.warning("inbox %s: UID %d could not be fetched; skipped", address, uid)
            else:
                self._one(address, uidvalidity, uid, raw, report)
            self._feedback.set_inbox_mark(address, uidvalidity, uid)

    def _one(self, address: str, uidvalidity: int, uid: int, raw: bytes, report: MailboxReport) -> None:
        parsed = parse(raw)
        where = f"inbox {address} UID {uid}"
        if parsed.kind is MessageKind.MALFORMED:
            report.outcomes[ReadOutcome.MALFORMED] += 1
            log.warning("%s: %s; left alone", where, parsed.detail)
            return
        row = self._row_of(parsed, address)
        if row is None:
            report.outcomes[ReadOutcome.UNMATCHED] += 1
            log.info("%s: a %s about no row of ours; left alone", where, parsed.kind)
            return
        if parsed.recipients and self._feedback.recipient_of(row) not in parsed.recipients:
            # The bounce names other addresses than the row's: it is not about this row after all.
            report.outcomes[ReadOutcome.UNMATCHED] += 1
            log.warning("%s: a %s naming row %d but not its recipient; left alone", where, parsed.kind, row)
            return
        event = EVENT_OF[parsed.kind]
        ref = parsed.own_message_id or f"imap:{address}:{uidvalidity}:{uid}"
        applied = self._feedback.apply(row, event, source="inbox", ref=ref, detail=parsed.detail)
        if applied is Applied.REPLAY:
            report.outcomes[ReadOutcome.REPLAY] += 1
            return
        report.outcomes[ReadOutcome.APPLIED] += 1
        report.outcomes[event.value] += 1
        log.info("%s: %s on row %d (%s)", where, event, row, applied)

    def _row_of(self, parsed: Parsed, address: str) -> int | None:
        for message_id in parsed.about:
            row = self._feedback.row_of(message_id)
            if row is not None:
                return row
        named = {row for row in (self._feedback.row_of(m) for m in parsed.quoted) if row is not None}
        if len(named) == 1:
            return named.pop()
        if parsed.kind in (MessageKind.REPLY, MessageKind.AUTO_REPLY, MessageKind.UNSUBSCRIBE) and parsed.sender and \
                parsed.sender != address.lower():
            return self._feedback.latest_row_to(parsed.sender, address)
        return None

    def _failed(self, report: MailboxReport, why: str) -> MailboxReport:
        log.error("inbox %s: %s", report.mailbox, why)
        report.error = why
        return report


def read_all(feedback: Feedback, mailboxes: list[Mailbox], *, env: Mapping[str, str] | None = None,
             timeout_s: float = 30.0) -> list[MailboxReport]:
    """One pass over every mailbox; a mailbox that fails is reported and the others are still read."""
    reader = InboxReader(feedback, env=env, timeout_s=timeout_s)
    return [reader.read(mailbox) for mailbox in mailboxes]

