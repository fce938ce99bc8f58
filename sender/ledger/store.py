"""The send ledger's Python face: enqueue, suppress, status, show; the agent's claim and settle calls.

    from sender import Ledger
    ledger = Ledger.from_url("postgresql://...")
    ledger.enqueue(lead="L1", step=1, address="a@b.com", group="sales", subject="Hi", text="...")  # -> "queued"

Every state change is one database function (see sql/schema.sql), so a person at psql meets the same rules.
"""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

import psycopg

from sender.addresses import canonical, canonical_domain
from sender.errors import LedgerUnavailable, SenderConfigError
from sender.ledger import connection as db
from sender.ledger.migrate import MigrateResult, current_version, latest_version, migrate
from sender.ledger.queries import query
from sendhost.masking import mask_url

MAX_ATTEMPTS = 3


class Enqueued(StrEnum):
    QUEUED = "queued"
    WAITING = "waiting"  # queued behind the lead's previous step, which is not sent yet
    DUPLICATE = "duplicate"
    SUPPRESSED = "suppressed"
    ENDED = "ended"  # the lead's sequence ended (a reply, a bounce, a step that failed): nothing more goes to it
    SAME_PERSON = "same_person"  # a new lead id for an address another enqueued lead holds an active sequence at


@dataclass(frozen=True)
class EnqueueResult:
    """One row's outcome in `enqueue_many`; `first_lead`: for SAME_PERSON, the lead whose address it is."""
    outcome: Enqueued
    first_lead: str | None = None


class Status(StrEnum):
    WAITING = "waiting"  # not due yet: the lead's previous step is not sent, or its campaign is not running
    QUEUED = "queued"
    SENDING = "sending"
    SENT = "sent"
    RETRY = "retry"
    FAILED = "failed"
    UNCONFIRMED = "unconfirmed"
    SUPPRESSED = "suppressed"
    CANCELLED = "cancelled"
    # feedback after the handoff (sender/ledger/events.py): ranked above sent (sender_status_ranks in
    # sql/schema.sql, docs/feedback.md)
    DELIVERED = "delivered"
    REPLIED = "replied"
    BOUNCED = "bounced"
    UNSUBSCRIBED = "unsubscribed"
    COMPLAINED = "complained"


class Settle(StrEnum):
    """What an attempt's outcome does to its row (sender_settle)."""

    RETRY = "retry"  # clear retryable failure: back in 30 minutes, at most MAX_ATTEMPTS in all
    REROUTE = "reroute"  # the mailbox's fault: back soon through another mailbox, the attempt refunded
    FAILED = "failed"
    SUPPRESS = "suppress"
    # the recipient's server refused the address for good (550 5.1.1 at RCPT): suppressed, and a hard bounce of the
    # mailbox in its health
    BOUNCE = "bounce"
    UNCONFIRMED = "unconfirmed"


@dataclass(frozen=True)
class Claimed:
    id: int
    lead: str | None  # the caller's id for the person (an enqueued lead's, a leads file's `lead`); None: none given
    step: int
    address: str
    group: str
    subject: str
    body: str
    attempts: int
    idempotency_key: uuid.UUID
    message_id: str | None
    attempt_id: uuid.UUID | None  # set only on a row whose earlier attempt started: never send it again
    pinned_mailbox: str | None = None  # a later step goes from the mailbox that sent the lead's previous one
    own_subject: bool = True  # False: a reply in the thread of the lead's earlier steps
    fields: Mapping[str, str] | None = None  # the lead's merge fields; None: subject and body are the text itself
    # the lead's earlier steps handed over, oldest first: (its own subject, None for a reply; its Message-ID)
    earlier: tuple[tuple[str | None, str], ...] = ()
    campaign_id: int | None = None
    lead_timezone: str | None = None  # the lead's own `timezone` column, as stored (not checked)
    source_hash: str | None = None  # of the campaign's file as applied; None: no file (`enqueue`), no window

    @classmethod
    def of(cls, row: Sequence[Any]) -> Claimed:
        (id_, lead, step, address, group, subject, body, attempts, key, message_id, attempt_id, pinned, own,
         fields, earlier, campaign_id, lead_timezone, source_hash) = row  # the claim query's columns, in order
        return cls(id_, lead, step, address, group, subject, body, attempts, key, message_id, attempt_id, pinned,
                   own, fields, tuple((text if own_text else None, mid) for own_text, text, mid in earlier or ()),
                   campaign_id, lead_timezone, source_hash)


@dataclass(frozen=True)
class Unconfirmed:
    """A row whose attempt started and whose end nobody knows: what a person needs to decide."""

    id: int
    campaign: str
    lead: str | None  # the caller's id, if any
    step: int
    address: str
    mailbox: str | None
    source_ip: str | None
    attempt_started_at: datetime | None
    message_id: str | None
    last_words: str  # the server's last words, or what the agent knew


@dataclass(frozen=True)
class Shown:
    row: dict[str, Any]
    events: list[dict[str, Any]]
    send_log: dict[str, Any] | None
    # each piece of feedback about the row, with its source and verdict (pass | none | fail: how sure it was)
    feedback: list[dict[str, Any]] = field(default_factory=list)


def suppression_entry(text: str) -> str:
    """The suppression list's key for `text`: `@domain` for a whole domain, else the canonical address."""
    stripped = text.strip(" \t")
    return f"@{canonical_domain(stripped)}" if stripped.startswith("@") else canonical(stripped)


class Ledger:
    """A connection to the send ledger. Not shared between threads: give each worker its own.

    `clock` gives the time in epoch seconds (as `ippool.Pool(clock=...)`); every rule that depends on the time
    (which rows are due, a retry's delay, the sweep's age, every timestamp written) then lives in its time.
    None: the database's own now(). `put_back_delay` maps the delay asked for a row given back (unclaim, a
    settle's retry) to the one written; None: as asked. A caller whose own scheduler does the waiting (the
    simulation) sees the asked delay there and writes 0."""

    def __init__(self, conn: psycopg.Connection, url: str | None = None, *,
                 clock: Callable[[], float] | None = None,
                 put_back_delay: Callable[[float], float] | None = None) -> None:
        self._conn = conn
        self.url = url
        self.clock = clock
        self._put_back_delay = put_back_delay

    @classmethod
    def from_url(cls, url: str, *, connect_timeout: int = db.CONNECT_TIMEOUT_S,
                 clock: Callable[[], float] | None = None) -> Ledger:
        return cls(db.connect(url, connect_timeout=connect_timeout), url, clock=clock)

    def now(self) -> datetime | None:
        """The clock's time, what every named query gets as %(now)s; None: the database's now()."""
        return None if self.clock is None else datetime.fromtimestamp(self.clock(), UTC)

    def reconnect(self) -> None:
        """Open a fresh connection (after the server restarted); LedgerUnavailable while it is still down."""
        if self.url is None:
            raise LedgerUnavailable("the ledger's connection was lost and it has no URL to reconnect to")
        with suppress(psycopg.Error):
            self._conn.close()
        self._conn = db.connect(self.url)

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def calling(self, what: str) -> Iterator[psycopg.Connection]:
        """The connection, for statements of several steps (a COPY, a transaction); a database error becomes a
        SenderConfigError or LedgerUnavailable naming `what`, as for every named query."""
        try:
            yield self._conn
        except psycopg.errors.UndefinedFunction as exc:
            raise SenderConfigError(f"{what}: the ledger has no schema yet ({exc.diag.message_primary}); run "
                                    "`sendhost sender migrate`") from None
        except psycopg.errors.UndefinedTable as exc:
            raise SenderConfigError(f"{what}: the ledger has no schema yet ({exc.diag.message_primary}); run "
                                    "`sendhost sender migrate`") from None
        except (psycopg.IntegrityError, psycopg.DataError) as exc:  # a CHECK or a type the database refused
            raise SenderConfigError(f"{what}: the ledger refused it: {exc.diag.message_primary}") from None
        except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
            raise LedgerUnavailable(f"{what}: database {mask_url(self.url or '?')} failed: "
                                    f"{db.error_line(exc, self.url)}") from None

    def fetch_one(self, name: str, params: Mapping[str, Any], what: str) -> tuple[Any, ...] | None:
        """Run the named query `name` (sql/*.sql) with `params` and the clock's now; its first row, if any.
        `what` names the call in errors."""
        with self.calling(what) as conn:
            return db.execute(conn, query(name), {**params, "now": self.now()}).fetchone()

    def fetch_all(self, name: str, params: Mapping[str, Any], what: str) -> list[tuple[Any, ...]]:
        """As fetch_one, every row."""
        with self.calling(what) as conn:
            return db.execute(conn, query(name), {**params, "now": self.now()}).fetchall()

    def run(self, name: str, params: Mapping[str, Any], what: str) -> None:
        """As fetch_one, for a statement that returns no rows."""
        with self.calling(what) as conn:
            db.execute(conn, query(name), {**params, "now": self.now()})

    def fetch_value(self, name: str, params: Mapping[str, Any], what: str) -> Any:
        """As fetch_one, for a query that always returns one row: its one value, or the row."""
        row = self.fetch_one(name, params, what)
        assert row is not None
        return row[0] if len(row) == 1 else row

    # --- schema ------------------------------------------------------------------------------------------------

    def migrate(self) -> MigrateResult:
        """Bring the schema to the latest version, then make the history's months ahead (sender.ledger.history)."""
        from sender.ledger.history import make_partitions

        with self.calling("migrate") as conn:
            result = migrate(conn)
        make_partitions(self)
        self.apply_roles()
        return result

    def apply_roles(self) -> None:
        """Create the job roles and grant each its functions (sql/roles.sql; idempotent, after every migrate)."""
        from sender.ledger.queries import sql_text

        with self.calling("roles") as conn, db.transaction(conn):
            conn.execute(sql_text("roles.sql"))

    def check_schema(self) -> None:
        """SenderConfigError unless the schema is at the version this code expects."""
        with self.calling("schema check") as conn:
            version = current_version(conn)
        if version < latest_version():
            raise SenderConfigError(f"the ledger's schema is at version {version}, this sendhost needs "
                                    f"{latest_version()}; run `sendhost sender migrate`")

    # --- the application's API ---------------------------------------------------------------------------------

    def enqueue(self, *, lead: str, step: int, address: str, group: str, subject: str, text: str,
                not_before: datetime | None = None, allow_same_person: bool = False) -> Enqueued:
        """Queue (lead, step) for `address` (reduced to its canonical address, or AddressError); queued, waiting,
        duplicate (already in the ledger), suppressed, ended or same_person (refused: a new lead id for an address
        another lead holds an active sequence at; `allow_same_person` queues it)."""
        outcome, _first = self.fetch_value("enqueue", {
            "lead": lead, "step": step, "address": canonical(address), "group": group, "subject": subject, "text": text,
            "not_before": not_before, "allow_same_person": allow_same_person}, f"enqueue {lead} step {step}")
        return Enqueued(outcome)

    def enqueue_many(self, rows: Sequence[dict[str, Any]], *, allow_same_person: bool = False) -> list[EnqueueResult]:
        """Enqueue every row in one transaction: all are written, or (on a failure, or an address that is not
        one: AddressError before anything is written) none."""
        results: list[EnqueueResult] = []
        now = self.now()
        checked = [{**row, "address": canonical(row["address"]), "allow_same_person": allow_same_person}
                   for row in rows]
        with self.calling("enqueue") as conn, db.transaction(conn):
            db.set_local_timeout(conn)
            for row in checked:
                found = conn.execute(query("enqueue"), {**row, "now": now}).fetchone()
                assert found is not None
                results.append(EnqueueResult(Enqueued(found[0]), found[1]))
        return results

    def suppress(self, address: str, reason: str = "") -> int:
        """Suppress `address`, or a whole domain written `@bigco.example`, for good (in canonical form, or
        AddressError); returns how many rows not sent yet it withdrew."""
        entry = suppression_entry(address)
        return int(self.fetch_value("suppress", {"address": entry, "reason": reason}, f"suppress {entry}"))

    def is_suppressed(self, address: str) -> bool:
        return bool(self.fetch_value("is_suppressed", {"address": address}, f"suppression check of {address}"))

    def counts(self) -> dict[str, int]:
        """Rows per status, every status listed."""
        counts = {status.value: 0 for status in Status}
        for status, count in self.fetch_all("status_counts", {}, "status"):
            counts[status] = int(count)
        return counts

    def status_ranks(self) -> dict[Status, int]:
        """The rank of each status, as the database's rank guard reads it (sender_status_ranks)."""
        return {Status(status): int(rank) for status, rank in self.fetch_all("status_ranks", {}, "status ranks")}

    def ping(self) -> None:
        """One round trip: LedgerUnavailable when the database does not answer."""
        self.fetch_one("ping", {}, "ping")

    def show(self, lead: str, step: int, campaign: str = "enqueue") -> Shown | None:
        """Step `step` of `lead` in `campaign` (the lead named by the caller's id, or in a campaign file's campaign
        by its address), its send-log entry and its history; None when there is no such row."""
        with self.calling(f"show {lead} step {step}") as conn:
            cursor = db.execute(conn, query("show_row"), {"lead": lead, "step": step, "campaign": campaign})
            row = cursor.fetchone()
            if row is None:
                return None
            assert cursor.description is not None
            record = dict(zip([c.name for c in cursor.description], row, strict=True))
            events = [{"at": at, "kind": kind, "detail": detail}
                      for at, kind, detail in db.execute(conn, query("show_events"), {"id": record["id"]}).fetchall()]
            cursor = db.execute(conn, query("show_send_log"), {"id": record["id"]})
            log_row = cursor.fetchone()
            send_log = None
            if log_row is not None:
                assert cursor.description is not None
                send_log = dict(zip([c.name for c in cursor.description], log_row, strict=True))
            feedback = [{"at": at, "event": event, "source": source, "verdict": verdict, "detail": detail}
                        for at, event, source, verdict, detail in
                        db.execute(conn, query("feedback_of_row"), {"id": record["id"]}).fetchall()]
        return Shown(record, events, send_log, feedback)

    # --- answers for people -----------------------------------------------------------------------------------

    def unconfirmed(self) -> list[Unconfirmed]:
        """Rows waiting for a person's verdict (sent or not), oldest attempt first."""
        return [Unconfirmed(*row) for row in self.fetch_all("unconfirmed_rows", {}, "unconfirmed rows")]

    def resolve(self, email_id: int, *, sent: bool, note: str) -> str:
        """A person's verdict on an unconfirmed row: resolved | not_unconfirmed | no_row."""
        return str(self.fetch_value("resolve", {"id": email_id, "sent": sent, "note": note}, f"resolve row {email_id}"))

    def status_of(self, email_id: int) -> Status | None:
        """The row's status; None: no such row."""
        row = self.fetch_one("row_status", {"id": email_id}, f"status of row {email_id}")
        return None if row is None else Status(row[0])

    def retry_now(self, email_id: int | None = None, due_before: datetime | None = None) -> int:
        """Make `retry` rows due now: one row, or every one due before `due_before`; how many."""
        return int(self.fetch_value("retry_now", {"id": email_id, "before": due_before}, "retry"))

    def lead_rows(self, who: str) -> list[dict[str, Any]]:
        """Every row of every lead that `who` names (an address, the caller's id), campaign and step order."""
        with self.calling(f"lead {who}") as conn:
            cursor = db.execute(conn, query("lead_rows"), {"who": who})
            assert cursor.description is not None
            names = [c.name for c in cursor.description]
            return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]

    def events_of(self, email_id: int) -> list[dict[str, Any]]:
        return [{"at": at, "kind": kind, "detail": detail}
                for at, kind, detail in self.fetch_all("show_events", {"id": email_id}, f"history of {email_id}")]

    # --- the agent's calls -------------------------------------------------------------------------------------

    def claim(self, worker: str, limit: int = 1, groups: Sequence[str] | None = None,
              mailboxes: Sequence[str] | None = None) -> list[Claimed]:
        """Claim up to `limit` due rows (one statement, FOR UPDATE SKIP LOCKED) of `groups`; a lead's later step
        only when its mailbox is among `mailboxes` (None: any)."""
        rows = self.fetch_all("claim", {"worker": worker, "limit": limit, "groups": list(groups) if groups else None,
                                        "mailboxes": [m.lower() for m in mailboxes] if mailboxes else None},
                              "claim")
        return [Claimed.of(row) for row in rows]

    def campaign_source(self, campaign_id: int) -> tuple[str, str, str] | None:
        """A campaign's (name, file as last applied, its hash as the claim gives it); None: no such campaign."""
        rows = self.fetch_all("campaign_file", {"id": campaign_id}, "read the campaign file")
        return None if not rows else (str(rows[0][0]), str(rows[0][1]), str(rows[0][2]))

    def unclaim(self, email_id: int, delay_s: float = 0.0, why: str = "") -> bool:
        return bool(self.fetch_value("unclaim", {"id": email_id, "delay_s": self._put_back(delay_s), "why": why},
                              "unclaim"))

    def begin_attempt(self, email_id: int, attempt: uuid.UUID, mailbox: str, source_ip: str | None,
                      message_id: str, subject: str | None = None) -> tuple[str, str | None]:
        """The last checks and the attempt's start: ("ok", the row's fixed Message-ID), ("suppressed", None),
        ("ended", None: the lead's sequence ended) or ("lost", None). `subject` is the Subject it sends."""
        outcome, stored = self.fetch_value("begin_attempt", {"id": email_id, "attempt": attempt, "mailbox": mailbox,
                                                      "source_ip": source_ip, "message_id": message_id,
                                                      "subject": subject},
                                    "begin attempt")
        return str(outcome), stored

    def record_sent(self, email_id: int, reply: str) -> bool:
        return bool(self.fetch_value("record_sent", {"id": email_id, "reply": reply}, "record the send"))

    def record_sent_and_claim(self, email_id: int, reply: str, worker: str, groups: Sequence[str] | None = None,
                              mailboxes: Sequence[str] | None = None) -> tuple[bool, Claimed | None]:
        """record_sent, then claim(worker, 1, groups, mailboxes), in one round trip: (recorded, the next row or
        None). Both statements are sent as one pipeline, so they run in order in one transaction (neither waits
        for the disk): a failure of either undoes both, and the caller records alone then (Agent._record)."""
        now = self.now()
        with self.calling("record the send and claim the next row") as conn:
            with conn.pipeline():
                db.set_local_timeout(conn)  # the pair's transaction, as db.execute does for one statement
                recorded = conn.execute(query("record_sent"), {"id": email_id, "reply": reply, "now": now})
                claimed = conn.execute(query("claim"), {
                    "worker": worker, "limit": 1, "groups": list(groups) if groups else None,
                    "mailboxes": [m.lower() for m in mailboxes] if mailboxes else None, "now": now})
            row = recorded.fetchone()
            rows = claimed.fetchall()
        assert row is not None
        return bool(row[0]), Claimed.of(rows[0]) if rows else None

    def settle(self, email_id: int, outcome: Settle, detail: str, delay_s: float = 0.0) -> Status:
        return Status(self.fetch_value("settle", {"id": email_id, "outcome": outcome.value, "detail": detail[:500],
                                           "delay_s": self._put_back(delay_s), "max_attempts": MAX_ATTEMPTS},
                                  "settle"))

    def _put_back(self, delay_s: float) -> float:
        return delay_s if self._put_back_delay is None else self._put_back_delay(delay_s)

    def sweep(self, older_than_s: float) -> tuple[int, int]:
        """Settle rows left `sending` longer than `older_than_s`: (requeued, unconfirmed)."""
        requeued, unconfirmed = self.fetch_value("sweep", {"older_than_s": older_than_s}, "sweep")
        return int(requeued), int(unconfirmed)

    def next_due_s(self, groups: Sequence[str] | None = None) -> float | None:
        """Seconds until the next waiting row of `groups` is due (<= 0: due now); None when nothing waits."""
        row = self.fetch_one("next_due", {"groups": list(groups) if groups else None}, "next due")
        return None if row is None or row[0] is None else float(row[0])

    def sends_since(self, since: datetime, mailboxes: Iterable[str]) -> list[tuple[str, datetime]]:
        """(mailbox, when) of every accepted or possibly-accepted send since `since`: what the guard counts."""
        rows = self.fetch_all("sends_since", {"since": since, "mailboxes": list(mailboxes)}, "read sends")
        return [(str(mailbox), when) for mailbox, when in rows]

    def campaign_sends_since(self, since: datetime, group: str) -> dict[tuple[str, str], list[tuple[str, datetime]]]:
        """{(campaign, its file as applied): [(mailbox, when)]} of every accepted or possibly-accepted send of a
        campaign file from mailbox group `group` since `since`: what the guard's campaign counters count."""
        sends: dict[tuple[str, str], list[tuple[str, datetime]]] = {}
        for name, source, mailbox, when in self.fetch_all("campaign_sends_since", {"since": since, "group": group},
                                                          "read campaign sends"):
            sends.setdefault((str(name), str(source)), []).append((str(mailbox), when))
        return sends

    def unsubscribe_key(self) -> bytes:
        """The HMAC key of unsubscribe tokens, created in the ledger on first use."""
        key = self.fetch_value("unsubscribe_key", {"new": secrets.token_hex(32)}, "unsubscribe key")
        return bytes.fromhex(str(key))
