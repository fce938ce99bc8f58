"""Feedback into the ledger: every event after the handoff goes through one database function with a rank guard.

    from sender import Ledger
    from sender.ledger.events import Event, Feedback
    with Feedback.from_url(url) as feedback:        # or Feedback(ledger), on a ledger you hold
        feedback.apply_by_message_id("<id@domain>", Event.DELIVERED, source="webhook", ref="2026-11-30T10:00:00Z")

The rank order and what each event does live in sql/schema.sql (sender_status_ranks, sender_apply_event; and
docs/feedback.md): a late `sent` never overwrites `delivered` or `failed`; nothing overwrites bounced, unsubscribed or
complained; replays are no-ops; an event whose verdict is `fail` (forged) is recorded and changes nothing. The ranks
are the database's alone: `Ledger.status_ranks()` reads them.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import date, datetime, time
from enum import StrEnum

from sender.ledger import connection as db
from sender.ledger.store import Ledger


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
    AUTO_REPLIED = "auto_replied"  # out-of-office and other automatic replies: noted, the sequence goes on (held)
    LEFT = "left"  # a reply saying the lead left or is the wrong person: replied, the sequence ends as `left`
    COLLEAGUE_REPLIED = "colleague_replied"  # another address at the lead's domain replied: the sequence ends
    OPENED = "opened"  # a relay's report of an open: recorded only (docs/tracking.md)
    CLICKED = "clicked"  # a relay's report of a click: recorded only


# What only reading a reply tells (sender.feedback.inbox, a person's reclassify): never a relay's to report, so
# `/events` ignores them.
FROM_READING = frozenset({Event.LEFT, Event.COLLEAGUE_REPLIED})


class Verdict(StrEnum):
    """How sure the source of an event is that it is what it claims: for mail, the DMARC result of its From domain
    in the mailbox provider's own Authentication-Results (sender.feedback.authentication)."""

    PASS = "pass"  # the provider found the From domain's DMARC passing
    NONE = "none"  # no result: no trusted header, a domain without DMARC, an error, or not a mail
    FAIL = "fail"  # the provider found it failing: forged; recorded, and nothing changes


class Applied(StrEnum):
    """The answer of sender_apply_event."""

    APPLIED = "applied"  # the row's status moved
    RECORDED = "recorded"  # a new event that changed no status (outranked, or an event without a status)
    FORGED = "forged"  # verdict fail: recorded with its verdict, nothing else changed
    REPLAY = "replay"  # already recorded: nothing changed
    NO_ROW = "no_row"  # no such row: nothing changed


class Reclassified(StrEnum):
    """The answer of sender_reclassify: a person's correction of what came back about a row."""

    APPLIED = "applied"  # the row's status or its lead's sequence changed
    RECORDED = "recorded"  # recorded; nothing else needed changing
    OUTRANKED = "outranked"  # the row already stands above what the verdict gives it: the rank guard kept it
    NOT_SENT = "not_sent"  # no attempt of the row ever started: nothing came back about it
    NO_ROW = "no_row"


@dataclass(frozen=True)
class TrackedRow:
    """A sent campaign row a click or open token names: what its links are read from, when the provider accepted
    it, and the ledger's time now."""

    id: int
    body: str
    fields: dict[str, str]
    accepted_at: datetime
    now: datetime


@dataclass(frozen=True)
class SentRow:
    """A row found by the Message-ID it was sent with."""

    id: int
    address: str


class Feedback:
    """The feedback calls, on a ledger it is given (its connection, clock and errors). Not shared between threads:
    give each its own, as Ledger."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    @classmethod
    def from_url(cls, url: str, *, connect_timeout: int = db.CONNECT_TIMEOUT_S,
                 clock: Callable[[], float] | None = None) -> Feedback:
        """Feedback on a ledger of its own at `url` (closed with it)."""
        return cls(Ledger.from_url(url, connect_timeout=connect_timeout, clock=clock))

    def close(self) -> None:
        self.ledger.close()

    def __enter__(self) -> Feedback:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def apply(self, email_id: int, event: Event, *, source: str, ref: str, at: datetime | None = None,
              detail: str = "", verdict: Verdict = Verdict.NONE) -> Applied:
        """Apply `event` to row `email_id` under the rank guard; (row, event, ref) is applied at most once. A
        `verdict` of FAIL records it and changes nothing (FORGED)."""
        return Applied(self._answer("apply_event", {"id": email_id, "event": event.value, "at": at, "source": source,
                                                    "ref": ref, "detail": detail, "verdict": verdict.value},
                                    f"apply {event} to row {email_id}"))

    def apply_by_message_id(self, message_id: str, event: Event, *, source: str, ref: str,
                            at: datetime | None = None, detail: str = "", verdict: Verdict = Verdict.NONE) -> Applied:
        """As apply, naming the row by the Message-ID it was sent with."""
        return Applied(self._answer("apply_event_by_message_id",
                                    {"message_id": message_id, "event": event.value, "at": at, "source": source,
                                     "ref": ref, "detail": detail, "verdict": verdict.value},
                                    f"apply {event} by Message-ID"))

    def hold(self, email_id: int, day: date, why: str) -> int:
        """Hold the lead of row `email_id` until the start of `day` on its wall clock (the lead's time zone, else its
        campaign's): its steps not sent yet wait until then, and the agent sends at the window's first opening after
        it (sender_hold). How many rows moved."""
        from sender.campaigns.spec import load_applied
        from sender.campaigns.window import zone
        from sendhost.errors import SendhostError

        found = self.ledger.fetch_one("hold_zone", {"id": email_id}, f"hold row {email_id}")
        if found is None:
            return 0
        lead_tz, name, source = found
        campaign_tz = "UTC"
        # a file as applied that no longer parses: UTC (its rows wait for it to be applied again anyway)
        with contextlib.suppress(SendhostError):
            campaign_tz = load_applied(str(name), str(source)).pacing.timezone if source else campaign_tz
        until = datetime.combine(day, time(), tzinfo=zone(lead_tz, campaign_tz))
        return int(self.ledger.fetch_value("hold", {"id": email_id, "until": until, "why": why},
                                           f"hold row {email_id}"))

    def colleague_reply(self, mailbox: str, sender: str, *, ref: str, detail: str,
                        verdict: Verdict = Verdict.NONE) -> tuple[int | None, Applied]:
        """A reply to `mailbox` from `sender`, at a lead's domain, that names no row: in campaigns that stop on a
        domain's reply, the lead there this mailbox mailed last ends as `colleague_replied` (sender_colleague_reply).
        (its row, the answer); (None, NO_ROW) when no lead qualifies."""
        row = self.ledger.fetch_one("colleague_reply", {"mailbox": mailbox, "sender": sender, "ref": ref,
                                                        "detail": detail, "verdict": verdict.value},
                                    f"a reply from {sender}")
        assert row is not None
        return (None if row[0] is None else int(row[0])), Applied(str(row[1]))

    def reclassify(self, email_id: int, event: Event, note: str) -> Reclassified:
        """A person's verdict on what came back about row `email_id` (replied, auto_replied, unsubscribed, bounced,
        left), applied with its effect under the rank guard (sender_reclassify)."""
        return Reclassified(self._answer("reclassify", {"id": email_id, "as": event.value, "note": note},
                                         f"reclassify row {email_id}"))

    def row_of_idempotency_key(self, key: uuid.UUID) -> int | None:
        """The row an unsubscribe token names: its random idempotency key, never handed out twice."""
        row = self.ledger.fetch_one("row_of_idempotency_key", {"key": key}, "find a row by idempotency key")
        return None if row is None else int(row[0])

    def tracked_row(self, key: uuid.UUID) -> TrackedRow | None:
        """The sent campaign row with idempotency key `key` (a click or open token's), else None."""
        row = self.ledger.fetch_one("tracked_row", {"key": key}, "find a tracked row")
        if row is None:
            return None
        email_id, body, fields, accepted_at, now = row
        return TrackedRow(int(email_id), str(body), {str(k): str(v) for k, v in fields.items()}, accepted_at, now)

    def links_clicked_since(self, email_id: int, since: datetime) -> frozenset[int]:
        """The links of row `email_id` clicked after `since` with a `human` verdict so far."""
        return frozenset(int(link) for link in self.ledger.fetch_value(
            "links_clicked_since", {"id": email_id, "since": since}, f"clicks of row {email_id}"))

    def record_engagement(self, email_id: int, kind: str, link: int | None, verdict: str, rule: str,
                          relabel_since: datetime | None = None) -> str:
        """Record a click (`kind` click, its link) or an open with its verdict: informational, no status changes
        (sender_record_engagement). `relabel_since`: the row's earlier ones since then get this verdict too."""
        return self._answer("record_engagement", {"id": email_id, "kind": kind, "link": link, "verdict": verdict,
                                                  "rule": rule, "relabel_since": relabel_since},
                            f"record a {kind} of row {email_id}")

    def row_of_row_id_token(self, email_id: int) -> int | None:
        """The row a first-form token (the row's id) names, only while the ledger still accepts those: a row whose
        message went out before the upgrade to version 9, for 30 days after it (feedback.sql)."""
        row = self.ledger.fetch_one("row_of_row_id_token", {"id": email_id}, f"find row {email_id}")
        return None if row is None else int(row[0])

    def row_of(self, message_id: str) -> int | None:
        """The row sent with `message_id`, if any."""
        row = self.ledger.fetch_one("row_of_message_id", {"message_id": message_id}, "find a row by Message-ID")
        return None if row is None else int(row[0])

    def rows_of(self, message_ids: Iterable[str]) -> dict[str, SentRow]:
        """The rows sent with any of `message_ids` ('<local@domain>'), in one lookup, by Message-ID."""
        wanted = list(dict.fromkeys(message_ids))
        if not wanted:
            return {}
        found = self.ledger.fetch_all("rows_of_message_ids", {"message_ids": wanted}, "find rows by Message-ID")
        return {str(message_id): SentRow(int(row), str(address)) for message_id, row, address in found}

    def address_of(self, email_id: int) -> str | None:
        row = self.ledger.fetch_one("address_of", {"id": email_id}, f"find row {email_id}")
        return None if row is None else str(row[0])

    def latest_row_to(self, address: str, mailbox: str) -> int | None:
        """The row this mailbox last handed over to `address` (a reply or an unsubscribe mail from it)."""
        row = self.ledger.fetch_one("latest_row_to", {"address": address, "mailbox": mailbox},
                                    "find a row by address")
        return None if row is None else int(row[0])

    def inbox_mark(self, mailbox: str) -> tuple[int, int] | None:
        """(UIDVALIDITY, last UID read) of `mailbox`'s inbox, or None before its first read."""
        row = self.ledger.fetch_one("inbox_mark", {"mailbox": mailbox}, f"inbox mark of {mailbox}")
        return None if row is None else (int(row[0]), int(row[1]))

    def set_inbox_mark(self, mailbox: str, uidvalidity: int, last_uid: int) -> None:
        """Advance the mark (never back, within one UIDVALIDITY; a new UIDVALIDITY starts over)."""
        self.ledger.run("set_inbox_mark", {"mailbox": mailbox, "uidvalidity": uidvalidity, "last_uid": last_uid},
                        f"inbox mark of {mailbox}")

    def health_since(self, since: datetime) -> dict[str, dict[str, int]]:
        """{mailbox: {sent, bounced, complained}} since `since`: what the warm-up health gates read."""
        rows = self.ledger.fetch_all("health_since", {"since": since}, "feedback health")
        return {str(mailbox): {"sent": int(sent), "bounced": int(bounced), "complained": int(complained)}
                for mailbox, sent, bounced, complained in rows}

    def _answer(self, name: str, params: dict[str, object], what: str) -> str:
        row = self.ledger.fetch_one(name, params, what)
        assert row is not None
        return str(row[0])
