"""Feedback into the ledger: every event after the handoff goes through one database function with a rank guard.

    from sender.ledger.events import Feedback, Event
    with Feedback.from_url(url) as feedback:
        feedback.apply_by_message_id("<id@domain>", Event.DELIVERED, source="webhook", ref="2026-11-30T10:00:00Z")

The rank order and what each event does live in sql/migrations/2_1_feedback.sql (and docs/feedback.md): a late
`sent` never overwrites `delivered`; nothing overwrites bounced, unsubscribed or complained; replays are no-ops.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from sender.ledger import connection as db
from sender.ledger.store import Ledger

_APPLY = "SELECT sender_apply_event(%(id)s, %(event)s, %(at)s, %(source)s, %(ref)s, %(detail)s)"
_APPLY_BY_MESSAGE_ID = ("SELECT sender_apply_event_by_message_id(%(message_id)s, %(event)s, %(at)s, %(source)s, "
                        "%(ref)s, %(detail)s)")
_ROW_OF_MESSAGE_ID = "SELECT id FROM sender_emails WHERE message_id = '<' || btrim(%(message_id)s, '<> ') || '>'"
_LATEST_ROW_TO = """
SELECT id FROM sender_emails WHERE recipient = lower(%(address)s) AND lower(mailbox) = lower(%(mailbox)s)
  AND message_id IS NOT NULL
ORDER BY attempt_started_at DESC NULLS LAST, id DESC LIMIT 1"""
_INBOX_MARK = "SELECT uidvalidity, last_uid FROM sender_inbox_marks WHERE mailbox = %(mailbox)s"
_SET_INBOX_MARK = """
INSERT INTO sender_inbox_marks (mailbox, uidvalidity, last_uid) VALUES (%(mailbox)s, %(uidvalidity)s, %(last_uid)s)
ON CONFLICT (mailbox) DO UPDATE
SET uidvalidity = excluded.uidvalidity, updated_at = now(),
    last_uid = CASE WHEN sender_inbox_marks.uidvalidity = excluded.uidvalidity
                    THEN greatest(sender_inbox_marks.last_uid, excluded.last_uid) ELSE excluded.last_uid END"""
_HEALTH = """
SELECT mailbox, count(*) FILTER (WHERE event = 'sent') AS sent, count(*) FILTER (WHERE event = 'bounced') AS bounced,
       count(*) FILTER (WHERE event = 'complained') AS complained
FROM (SELECT mailbox, 'sent' AS event FROM sender_send_log WHERE accepted_at >= %(since)s
      UNION ALL
      SELECT mailbox, event FROM sender_feedback
      WHERE occurred_at >= %(since)s AND event IN ('bounced', 'complained') AND mailbox IS NOT NULL) AS seen
GROUP BY mailbox"""


class Event(StrEnum):
    """What can be reported about a row after its handoff. The first six set a status (by rank); the others are
    recorded only."""

    SENT = "sent"
    DELIVERED = "delivered"
    REPLIED = "replied"
    BOUNCED = "bounced"  # a hard bounce: the recipient is suppressed
    UNSUBSCRIBED = "unsubscribed"  # the recipient is suppressed
    COMPLAINED = "complained"  # a spam complaint: the recipient is suppressed
    DEFERRED = "deferred"  # a soft bounce: noted, the row keeps its status
    AUTO_REPLIED = "auto_replied"  # out-of-office and other automatic replies: noted, the sequence goes on


class Applied(StrEnum):
    """The answer of sender_apply_event."""

    APPLIED = "applied"  # the row's status moved
    RECORDED = "recorded"  # a new event that changed no status (outranked, or an event without a status)
    REPLAY = "replay"  # already recorded: nothing changed
    NO_ROW = "no_row"  # no such row: nothing changed


# The order the database applies (sender_rank); documented in docs/feedback.md and checked by the tests.
RANK: dict[str, int] = {
    "queued": 0, "retry": 0, "sending": 1, "failed": 2, "cancelled": 2, "suppressed": 2, "unconfirmed": 3,
    "sent": 4, "delivered": 5, "replied": 6, "bounced": 7, "unsubscribed": 8, "complained": 9,
}


class Feedback(Ledger):
    """The ledger's feedback calls. Not shared between threads: give each its own, as Ledger."""

    @classmethod
    def from_url(cls, url: str, *, connect_timeout: int = db.CONNECT_TIMEOUT_S) -> Feedback:
        return cls(db.connect(url, connect_timeout=connect_timeout), url)

    def __enter__(self) -> Feedback:
        return self

    def apply(self, email_id: int, event: Event, *, source: str, ref: str, at: datetime | None = None,
              detail: str = "") -> Applied:
        """Apply `event` to row `email_id` under the rank guard; (row, event, ref) is applied at most once."""
        with self._calling(f"apply {event} to row {email_id}") as conn:
            row = conn.execute(_APPLY, {"id": email_id, "event": event.value, "at": at, "source": source,
                                        "ref": ref, "detail": detail}).fetchone()
        assert row is not None
        return Applied(row[0])

    def apply_by_message_id(self, message_id: str, event: Event, *, source: str, ref: str,
                            at: datetime | None = None, detail: str = "") -> Applied:
        """As apply, naming the row by the Message-ID it was sent with."""
        with self._calling(f"apply {event} by Message-ID") as conn:
            row = conn.execute(_APPLY_BY_MESSAGE_ID, {"message_id": message_id, "event": event.value, "at": at,
                                                      "source": source, "ref": ref, "detail": detail}).fetchone()
        assert row is not None
        return Applied(row[0])

    def has_row(self, email_id: int) -> bool:
        with self._calling(f"find row {email_id}") as conn:
            return conn.execute("SELECT 1 FROM sender_emails WHERE id = %s", (email_id,)).fetchone() is not None

    def row_of(self, message_id: str) -> int | None:
        """The row sent with `message_id`, if any."""
        with self._calling("find a row by Message-ID") as conn:
            row = conn.execute(_ROW_OF_MESSAGE_ID, {"message_id": message_id}).fetchone()
        return None if row is None else int(row[0])

    def recipient_of(self, email_id: int) -> str | None:
        with self._calling(f"find row {email_id}") as conn:
            row = conn.execute("SELECT recipient FROM sender_emails WHERE id = %s", (email_id,)).fetchone()
        return None if row is None else str(row[0])

    def latest_row_to(self, address: str, mailbox: str) -> int | None:
        """The row this mailbox last handed over to `address` (a reply or an unsubscribe mail from it)."""
        with self._calling("find a row by address") as conn:
            row = conn.execute(_LATEST_ROW_TO, {"address": address, "mailbox": mailbox}).fetchone()
        return None if row is None else int(row[0])

    def inbox_mark(self, mailbox: str) -> tuple[int, int] | None:
        """(UIDVALIDITY, last UID read) of `mailbox`'s inbox, or None before its first read."""
        with self._calling(f"inbox mark of {mailbox}") as conn:
            row = conn.execute(_INBOX_MARK, {"mailbox": mailbox}).fetchone()
        return None if row is None else (int(row[0]), int(row[1]))

    def set_inbox_mark(self, mailbox: str, uidvalidity: int, last_uid: int) -> None:
        """Advance the mark (never back, within one UIDVALIDITY; a new UIDVALIDITY starts over)."""
        with self._calling(f"inbox mark of {mailbox}") as conn:
            conn.execute(_SET_INBOX_MARK, {"mailbox": mailbox, "uidvalidity": uidvalidity, "last_uid": last_uid})

    def health_since(self, since: datetime) -> dict[str, dict[str, int]]:
        """{mailbox: {sent, bounced, complained}} since `since`: what the warm-up health gates read."""
        with self._calling("feedback health") as conn:
            rows = conn.execute(_HEALTH, {"since": since}).fetchall()
        return {str(mailbox): {"sent": int(sent), "bounced": int(bounced), "complained": int(complained)}
                for mailbox, sent, bounced, complained in rows}
