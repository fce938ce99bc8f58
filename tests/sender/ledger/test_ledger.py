"""The ledger's rules, as the database enforces them, on a real PostgreSQL."""

from __future__ import annotations

import subprocess
import sys
import uuid

import psycopg
import pytest

from sender import Enqueued, Ledger, Settle, Status
from sender.ledger.migrate import latest_version
from tests.conftest import REPO_ROOT


def _queue(ledger: Ledger, lead: str = "L1", step: int = 1, address: str | None = None) -> Enqueued:
    """`lead`'s `step`, to an address of the lead's own unless `address` (one active sequence per address)."""
    return ledger.enqueue(lead=lead, step=step, address=address or f"{lead.lower()}@example.com", group="sales",
                          subject="Hi", text="Hello")


def test_migrate_is_idempotent_and_versioned(database_url: str) -> None:
    with Ledger.from_url(database_url) as ledger:
        first = ledger.migrate()
        second = ledger.migrate()
    fresh = ("schema.sql",)  # the current schema at once, recorded as the latest version
    assert (first.before, first.after, first.applied) == (0, latest_version(), fresh)
    assert (second.before, second.after, second.applied) == (latest_version(), latest_version(), ())


def test_migrate_from_two_processes_at_once(database_url: str) -> None:
    code = "import sys; from sender import Ledger; print(Ledger.from_url(sys.argv[1]).migrate().applied)"
    procs = [subprocess.Popen([sys.executable, "-c", code, database_url], cwd=REPO_ROOT, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(4)]
    outputs = [p.communicate(timeout=60) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0, 0], outputs
    fresh = str(("schema.sql",))
    assert sorted(out.strip() for out, _err in outputs) == sorted(["()", "()", "()", fresh])


def test_a_pair_is_queued_once(ledger: Ledger, database_url: str) -> None:
    assert _queue(ledger) is Enqueued.QUEUED
    assert _queue(ledger) is Enqueued.DUPLICATE
    assert _queue(ledger, step=2) is Enqueued.WAITING  # behind step 1, which is not sent yet
    # The rule is the database's, not the function's: a direct insert is refused too.
    with psycopg.connect(database_url) as conn, pytest.raises(psycopg.errors.UniqueViolation):
        conn.execute("INSERT INTO sender_emails (campaign_id, lead_id, step, address, mailbox_group, subject, body) "
                     "SELECT campaign_id, id, 1, 'b@example.com', 'sales', 's', 'b' FROM sender_leads "
                     "WHERE lead = 'L1'")
    assert (ledger.counts()["queued"], ledger.counts()["waiting"]) == (1, 1)


def test_suppressed_address_is_refused_and_withdrawn(ledger: Ledger) -> None:
    assert _queue(ledger, "L1", address="Bob@Example.com") is Enqueued.QUEUED
    assert ledger.suppress("bob@example.COM", "replied: stop") == 1
    assert _queue(ledger, "L2", address="bob@example.com") is Enqueued.SUPPRESSED
    counts = ledger.counts()
    assert (counts["queued"], counts["suppressed"]) == (0, 1)
    assert ledger.claim("w1", 10) == []


def test_claims_never_overlap(ledger: Ledger, database_url: str) -> None:
    for n in range(20):
        _queue(ledger, f"L{n}")
    with Ledger.from_url(database_url) as other:
        first = ledger.claim("a", 7)
        second = other.claim("b", 30)
    assert len(first) == 7 and len(second) == 13
    assert not {c.id for c in first} & {c.id for c in second}


def test_claim_skips_rows_another_claim_holds(ledger: Ledger, database_url: str) -> None:
    """A claim still open in one transaction (its rows locked, not yet committed) must not hold up another: the
    second claim takes the other due rows at once (FOR UPDATE SKIP LOCKED), it never waits for the first."""
    for n in range(5):
        _queue(ledger, f"L{n}")
    # The waiting a claim must never do is bounded here, so a claim that waits fails at once instead of hanging.
    with psycopg.connect(database_url) as holder, \
            Ledger(psycopg.connect(database_url, autocommit=True, options="-c lock_timeout=2000")) as other:
        held = holder.execute("SELECT id FROM sender_claim('a', 2, NULL, NULL)").fetchall()  # a transaction left open
        taken = other.claim("b", 10)
        holder.rollback()
    assert len(held) == 2
    assert len(taken) == 3 and not {c.id for c in taken} & {row_id for (row_id,) in held}


def test_a_claim_reads_the_head_of_the_queue_not_all_of_it(ledger: Ledger, database_url: str) -> None:
    """On a fresh ledger the statistics are stale (autovacuum has not analyzed it yet): the planner believes the
    queue holds a few rows. A claim must still take the oldest due rows off the due index without reading the
    whole queue to sort it, or every claim costs the length of the queue."""
    ledger.enqueue_many([{"lead": f"L{n}", "step": 1, "address": f"a{n}@example.com", "group": "sales", "subject": "s",
                          "text": "t", "not_before": None} for n in range(1500)])
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("ALTER TABLE sender_emails SET (autovacuum_enabled = false)")  # keep the statistics stale

        def due_index_reads() -> int:
            conn.execute("SELECT pg_stat_force_next_flush()")
            conn.execute("SELECT 1")  # the end of a transaction flushes this backend's counters
            conn.execute("SELECT pg_stat_clear_snapshot()")
            row = conn.execute("SELECT idx_tup_read FROM pg_stat_user_indexes "
                               "WHERE indexrelname = 'sender_emails_due'").fetchone()
            assert row is not None
            return int(row[0])

        claim = "SELECT id FROM sender_claim('w', 1, ARRAY['sales'], NULL)"
        for _ in range(6):  # past PL/pgSQL's first custom plans, onto the plan it keeps
            conn.execute(claim).fetchall()
        before = due_index_reads()
        claimed = conn.execute(claim).fetchall()
        reads = due_index_reads() - before
    assert len(claimed) == 1
    assert reads <= 10, f"one claim read {reads} entries of the due index"


def _attempt(ledger: Ledger, email_id: int) -> str | None:
    outcome, message_id = ledger.begin_attempt(email_id, uuid.uuid4(), "m@example.com", "127.0.0.2",
                                               f"<{uuid.uuid4()}@example.com>")
    assert outcome == "ok"
    return message_id


def test_message_id_is_fixed_before_the_first_call_and_kept(ledger: Ledger) -> None:
    _queue(ledger)
    (row,) = ledger.claim("w", 1)
    first = _attempt(ledger, row.id)
    assert ledger.settle(row.id, Settle.RETRY, "451 4.3.0 try later", delay_s=0) is Status.RETRY
    (again,) = ledger.claim("w", 1)
    assert again.message_id == first and again.attempt_id is None
    assert _attempt(ledger, again.id) == first


def test_retry_stops_after_three_attempts_and_reroute_refunds(ledger: Ledger) -> None:
    _queue(ledger)
    outcomes = []
    for outcome in (Settle.RETRY, Settle.REROUTE, Settle.RETRY, Settle.RETRY):
        (row,) = ledger.claim("w", 1)
        _attempt(ledger, row.id)
        outcomes.append(ledger.settle(row.id, outcome, "x", delay_s=0))
    assert outcomes == [Status.RETRY, Status.RETRY, Status.RETRY, Status.FAILED]


def test_retry_waits_thirty_minutes(ledger: Ledger) -> None:
    _queue(ledger)
    (row,) = ledger.claim("w", 1)
    _attempt(ledger, row.id)
    ledger.settle(row.id, Settle.RETRY, "451", delay_s=1800)
    assert ledger.claim("w", 1) == []


def test_a_sent_row_is_never_downgraded(ledger: Ledger) -> None:
    _queue(ledger)
    (row,) = ledger.claim("w", 1)
    _attempt(ledger, row.id)
    assert ledger.record_sent(row.id, "250 2.0.0 OK")
    assert not ledger.record_sent(row.id, "250 2.0.0 OK")  # one send-log entry per row
    assert ledger.settle(row.id, Settle.UNCONFIRMED, "late timeout") is Status.SENT
    assert ledger.sweep(0) == (0, 0)


def test_a_record_claims_the_next_row_in_the_same_call(ledger: Ledger) -> None:
    _queue(ledger, "L1")
    _queue(ledger, "L2")
    (row,) = ledger.claim("w", 1)
    _attempt(ledger, row.id)
    recorded, ahead = ledger.record_sent_and_claim(row.id, "250 2.0.0 OK", "w")
    assert recorded and ahead is not None and ahead.lead == "L2" and ahead.attempt_id is None
    shown = ledger.show("L1", 1)
    assert shown is not None and shown.row["status"] == "sent" and shown.send_log is not None
    with ledger.calling("read the claim") as conn:
        claim = conn.execute("SELECT status::text, claimed_by FROM sender_emails WHERE id = %s", (ahead.id,))
        assert claim.fetchone() == ("sending", "w")
    _attempt(ledger, ahead.id)
    assert ledger.record_sent_and_claim(ahead.id, "250 2.0.0 OK", "w") == (True, None)  # nothing left to claim
    assert ledger.record_sent_and_claim(ahead.id, "250 2.0.0 OK", "w") == (False, None)  # one entry per row


def test_a_failed_record_claims_nothing(ledger: Ledger) -> None:
    """The two statements are one transaction: a record the ledger refuses (no attempt) takes no claim with it."""
    _queue(ledger, "L1")
    _queue(ledger, "L2")
    (row,) = ledger.claim("w", 1)
    with pytest.raises(psycopg.errors.RaiseException, match="has no attempt"):
        ledger.record_sent_and_claim(row.id, "250 2.0.0 OK", "w")
    waiting = ledger.show("L2", 1)
    assert waiting is not None and waiting.row["status"] == "queued"


def test_sweep_requeues_unstarted_and_never_resends_started(ledger: Ledger) -> None:
    _queue(ledger, "L1")
    _queue(ledger, "L2")
    first, second = ledger.claim("dead-agent", 2)
    _attempt(ledger, second.id)
    assert ledger.sweep(3600) == (0, 0)  # not old enough
    assert ledger.sweep(0) == (1, 1)
    (requeued,) = ledger.claim("w", 5)
    assert requeued.id == first.id
    shown = ledger.show("L2", 1)
    assert shown is not None and shown.row["status"] == "unconfirmed"


def test_a_sweep_never_waits_for_a_row_someone_holds(ledger: Ledger, database_url: str) -> None:
    """Sweeps run in every agent: one that waited for a row another held would deadlock with the next, each
    holding rows the other reached first (stop 36's CI). A held row is left to the next sweep."""
    _queue(ledger, "L1")
    _queue(ledger, "L2")
    unstarted, started = ledger.claim("dead-agent", 2)
    _attempt(ledger, started.id)
    with psycopg.connect(database_url) as holder:
        holder.execute("ALTER DATABASE " + holder.info.dbname + " SET lock_timeout = '2s'")
        holder.commit()
        holder.execute("SELECT 1 FROM sender_emails WHERE id = ANY(%s) FOR NO KEY UPDATE",
                       ([unstarted.id, started.id],))
        with Ledger.from_url(database_url) as impatient:  # a wait would end in a lock timeout, not hang
            assert impatient.sweep(0) == (0, 0)
        holder.rollback()
    assert ledger.sweep(0) == (1, 1)


def test_suppression_withdraws_a_row_waiting_to_retry(ledger: Ledger) -> None:
    """A row waiting in `retry` is as much a future send as a queued one: suppressing its address withdraws it at
    once (not when it comes due), and the count says so."""
    _queue(ledger)
    (row,) = ledger.claim("w", 1)
    _attempt(ledger, row.id)
    assert ledger.settle(row.id, Settle.RETRY, "451 4.3.0 try later", delay_s=1800) is Status.RETRY
    assert ledger.suppress("l1@example.com", "unsubscribed") == 1
    shown = ledger.show("L1", 1)
    assert shown is not None and shown.row["status"] == "suppressed"
    assert ledger.counts()["retry"] == 0


def test_suppression_right_before_the_handoff(ledger: Ledger) -> None:
    _queue(ledger)
    (row,) = ledger.claim("w", 1)
    ledger.suppress("l1@example.com", "unsubscribed")
    assert ledger.begin_attempt(row.id, uuid.uuid4(), "m@example.com", None, "<x@example.com>") == \
        ("suppressed", None)
    assert ledger.counts()["suppressed"] == 1


def test_values_the_database_refuses_are_bad_input(ledger: Ledger) -> None:
    from sender.errors import SenderConfigError

    with pytest.raises(SenderConfigError, match="the ledger refused it"):
        ledger.enqueue(lead="L1", step=0, address="a@example.com", group="sales", subject="s", text="t")
    with pytest.raises(SenderConfigError, match="the ledger refused it"):
        ledger.enqueue(lead="", step=1, address="a@example.com", group="sales", subject="s", text="t")
    assert ledger.counts()["queued"] == 0


def test_the_api_reduces_addresses_to_their_canonical_form_or_refuses_them(ledger: Ledger,
                                                                           database_url: str) -> None:
    from sender.addresses import AddressError

    assert ledger.enqueue(lead="L1", step=1, address=" Eve@Bigco.Example", group="sales", subject="s",
                          text="t") == Enqueued.QUEUED
    assert ledger.suppress("EVE@bigco.example", "asked") == 1
    assert ledger.suppress("@Other.Example", "asked") == 0
    with psycopg.connect(database_url) as conn:
        assert conn.execute("SELECT address FROM sender_emails").fetchall() == [("eve@bigco.example",)]
        assert conn.execute("SELECT address FROM sender_suppressions ORDER BY 1").fetchall() == [
            ("@other.example",), ("eve@bigco.example",)]
    with pytest.raises(AddressError, match="has no @"):
        ledger.enqueue(lead="L2", step=1, address="nobody", group="sales", subject="s", text="t")
    with pytest.raises(AddressError, match="is not a plain address"):
        ledger.suppress("Eve <eve@bigco.example>")
    rows = [{"lead": "L3", "step": 1, "address": "c@x.example", "group": "sales", "subject": "s", "text": "t",
             "not_before": None}, {"lead": "L4", "step": 1, "address": "d@x", "group": "sales", "subject": "s",
                                   "text": "t", "not_before": None}]
    with pytest.raises(AddressError, match="single label"):
        ledger.enqueue_many(rows)
    assert ledger.counts()["queued"] == 0  # L1 was withdrawn; neither row of the refused batch was written
