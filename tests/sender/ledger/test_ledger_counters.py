"""The ledger's counters (schema.sql, version 10: sender_counts, sender_count_changes) are what a count of the
tables says: after any interleaving of the ledger's functions (hypothesis drives the sequence rules' machine:
enqueue, claim, sends, settles, give-backs, sweeps, feedback, suppressions, a person's resolutions, campaign
moves), after writers in several processes at once, and after an upgrade from version 9 of a ledger that had rows.
`sender status` and /metrics read them (queries.sql, status_counts and event_counts)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import psycopg
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, run_state_machine_as_test

from sender import Ledger, Status
from sender.ledger.queries import migrations, query
from tests.conftest import REPO_ROOT
from tests.sender.campaigns.test_sequence_property import prepared, sequence_machine
from tests.support.postgres_server import fresh_database

__all__ = ["prepared"]  # the sequence machine's committed start, a fixture of this module's tests too

ROWS_COUNTED = "SELECT status::text, count(*) FROM sender_emails GROUP BY status"
EVENTS_COUNTED = "SELECT kind, count(*) FROM sender_events GROUP BY kind"


def _truth(conn: psycopg.Connection[Any]) -> tuple[dict[str, int], dict[str, int]]:
    rows = {status.value: 0 for status in Status}
    rows.update({str(s): int(n) for s, n in conn.execute(ROWS_COUNTED).fetchall()})
    return rows, {str(k): int(n) for k, n in conn.execute(EVENTS_COUNTED).fetchall()}


def _counted(ledger: Ledger) -> tuple[dict[str, int], dict[str, int]]:
    events = {str(k): int(n) for k, n in ledger.fetch_all("event_counts", {}, "test")}
    return ledger.counts(), events


def counting_machine(conn: psycopg.Connection[Any], url: str) -> type[RuleBasedStateMachine]:
    base: Any = sequence_machine(conn, url)

    class Counting(base):  # the sequence rules' machine, with one more invariant
        @invariant()
        def counters_are_the_counts(self) -> None:
            assert _counted(self.ledger) == _truth(conn)

    return Counting


def test_after_any_interleaving_the_counters_are_what_a_count_of_the_tables_says(
        prepared: psycopg.Connection[Any], database_url: str) -> None:
    run_state_machine_as_test(counting_machine(prepared, database_url),
                              settings=settings(max_examples=40, stateful_step_count=40, deadline=None,
                                                suppress_health_check=[HealthCheck.too_slow]))


def test_writers_in_several_processes_leave_the_counters_equal_to_the_counts(database_url: str) -> None:
    """Six processes claiming several rows at once, settling, enqueueing in batches and folding as they go, and a
    reader folding meanwhile: no writer waits on another's counter (none deadlocks), and nothing is lost."""
    with Ledger.from_url(database_url) as ledger:
        ledger.migrate()
        ledger.enqueue_many([{"lead": f"s{n}", "step": 1, "address": f"s{n}@rcpt.example", "group": "sales",
                              "subject": "s", "text": "t", "not_before": None} for n in range(300)])
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    procs = [subprocess.Popen([sys.executable, "-m", "tests.sender.counters_child", database_url, str(seed), "150"],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for seed in range(6)]
    stop = threading.Event()
    reads: list[dict[str, int]] = []

    def read() -> None:
        with Ledger.from_url(database_url) as reader:
            while not stop.is_set():
                reads.append(reader.counts())

    reader = threading.Thread(target=read)
    reader.start()
    try:
        results = [proc.communicate(timeout=300) for proc in procs]
    finally:
        stop.set()
        reader.join()
    for proc, (_out, err) in zip(procs, results, strict=True):
        assert proc.returncode == 0, err
    assert reads, "the reader never read while the writers wrote"
    with psycopg.connect(database_url) as conn, Ledger.from_url(database_url) as ledger:
        truth = _truth(conn)
        counted = _counted(ledger)
    assert counted == truth
    assert truth[0]["sent"] > 0 and sum(truth[0].values()) > 300  # the writers did send and enqueue


def test_an_upgrade_counts_the_rows_already_there(postgres_admin: str, tmp_path: Path) -> None:
    with fresh_database(postgres_admin) as url:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(query("versions_table"))
            for number, name, text in migrations():
                if number <= 9:
                    with conn.transaction():
                        conn.execute(text)
                        conn.execute(query("record_version"), {"version": number, "name": name})
            for n in range(5):  # as that sendhost enqueued and claimed them, through version 9's functions
                conn.execute("SELECT sender_enqueue(%s, 1, %s, 'sales', 's', 't', NULL, NULL)",
                             (f"L{n}", f"l{n}@rcpt.example"))
            claimed = conn.execute("SELECT id FROM sender_claim('w', 2, ARRAY['sales'], ARRAY[]::text[])").fetchall()
            assert len(claimed) == 2
        with Ledger.from_url(url) as ledger:
            ledger.migrate()
            counted = _counted(ledger)
        with psycopg.connect(url) as conn:
            assert counted == _truth(conn)
    assert counted[0]["queued"] == 3 and counted[0]["sending"] == 2


def test_a_truncate_starts_the_counters_again(ledger: Ledger, database_url: str) -> None:
    ledger.migrate()
    ledger.enqueue(lead="L", step=1, address="l@rcpt.example", group="sales", subject="s", text="t")
    with psycopg.connect(database_url) as conn:
        conn.execute("TRUNCATE sender_emails, sender_events, sender_send_log, sender_sent, sender_feedback CASCADE")
        conn.commit()
        ledger.enqueue(lead="M", step=1, address="m@rcpt.example", group="sales", subject="s", text="t")
        assert _counted(ledger) == _truth(conn)
    assert ledger.counts()["queued"] == 1


def test_a_read_only_transaction_reads_the_counts_without_folding(ledger: Ledger, database_url: str) -> None:
    """What a standby or a read-only role does: the lines not folded are counted, none is moved."""
    ledger.migrate()
    ledger.enqueue(lead="L", step=1, address="l@rcpt.example", group="sales", subject="s", text="t")
    with psycopg.connect(database_url) as conn:
        conn.execute("SET TRANSACTION READ ONLY")
        (lines,) = conn.execute("SELECT count(*) FROM sender_count_changes").fetchone() or (0,)
        counted = dict(conn.execute(query("status_counts"), {"now": None}).fetchall())
        (after,) = conn.execute("SELECT count(*) FROM sender_count_changes").fetchone() or (0,)
    assert lines > 0 and after == lines
    assert counted == {"queued": 1}
