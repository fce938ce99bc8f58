"""The history by month (schema version 13): sender_events and sender_send_log are partitioned by month, made ahead
by migrate; an entry for a month not made lands in DEFAULT and moves into its month when that is made;
`sendhost sender retire-history` drops whole old months, keeps the counts and what the sequence rules read, and
refuses while a month holds the history of a row still sending or unconfirmed."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from subprocess import CompletedProcess

import psycopg
import pytest

from sender import Ledger
from sender.ledger.history import make_partitions
from sender.ledger.queries import migrations, query
from tests.sender.world import World
from tests.support.postgres_server import fresh_database

Cli = Callable[..., CompletedProcess[str]]
# Months long past whenever the tests run: no partition of them is made ahead.
JUNE = datetime(2025, 6, 10, 9, 0, tzinfo=UTC)
JULY = datetime(2025, 7, 10, 9, 0, tzinfo=UTC)
MAILBOX = "ann@sales.example"


@pytest.fixture
def retire(cli: Cli, database_url: str, tmp_path: Path, ledger: Ledger) -> Cli:
    def run(*args: str) -> CompletedProcess[str]:
        return cli("sender", "--database-url", database_url, "retire-history", *args, cwd=tmp_path)
    return run


def _months(conn: psycopg.Connection, table: str) -> list[str]:
    return [name for (name,) in conn.execute(
        "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
        "WHERE i.inhparent = %s::regclass ORDER BY 1", (table,))]


def _month_name(table: str, when: datetime) -> str:
    return f"{table}_y{when:%Y}m{when:%m}"


def _sent(conn: psycopg.Connection, lead: str, at: datetime) -> int:
    """Lead `lead`'s step 1 enqueued, claimed, attempted and accepted at `at` (the ledger's functions, at `at`)."""
    # a version 12 ledger's function returns the outcome alone, version 15's with the lead it names
    (outcome, *_first_lead) = conn.execute("SELECT * FROM sender_enqueue(%s, 1, %s, 'sales', 'Hi', 'Hello', NULL, "
                                           "p_now => %s)", (lead, f"{lead.lower()}@example.com", at)).fetchone() or ()
    assert outcome == "queued"
    (row,) = conn.execute("SELECT id FROM sender_claim('w1', 1, NULL, NULL, %s)", (at,)).fetchone() or (None,)
    assert conn.execute("SELECT outcome FROM sender_begin_attempt(%s, gen_random_uuid(), %s, NULL, %s, 'Hi', %s)",
                        (row, MAILBOX, f"<{lead}@sales.example>", at)).fetchone() == ("ok",)
    assert conn.execute("SELECT sender_record_sent(%s, '250 ok', %s)", (row, at + timedelta(minutes=1))).fetchone() \
        == (True,)
    return int(row)


def _event_counts(conn: psycopg.Connection) -> dict[str, int]:
    return {kind: int(n) for kind, n in conn.execute("SELECT key, n FROM sender_counted('events')")}


def test_migrate_makes_this_month_and_the_next_two_of_both_tables(ledger: Ledger, database_url: str) -> None:
    now = datetime.now(UTC)
    months = [now.replace(day=1)]
    for _ in range(2):
        months.append((months[-1] + timedelta(days=32)).replace(day=1))
    with psycopg.connect(database_url) as conn:
        for table in ("sender_events", "sender_send_log"):
            assert _months(conn, table) == sorted([f"{table}_default", *(_month_name(table, m) for m in months)])
    assert ledger.migrate().applied == ()
    assert make_partitions(ledger) == 0  # made already: nothing to do, however often it is called


def test_an_entry_without_its_month_lands_in_default_and_moves_when_the_month_is_made(
        ledger: Ledger, database_url: str) -> None:
    with psycopg.connect(database_url, autocommit=True) as conn:
        row = _sent(conn, "L1", JUNE)
        where = conn.execute("SELECT DISTINCT tableoid::regclass::text FROM sender_events WHERE email_id = %s "
                             "UNION ALL SELECT tableoid::regclass::text FROM sender_send_log WHERE email_id = %s",
                             (row, row)).fetchall()
        assert sorted(where) == [("sender_events_default",), ("sender_send_log_default",)]
        counts = _event_counts(conn)
        assert counts == {"queued": 1, "attempt": 1, "sent": 1}

        assert make_partitions(ledger) == 2  # June of each table: the months ahead exist since migrate

        where = conn.execute("SELECT DISTINCT tableoid::regclass::text FROM sender_events WHERE email_id = %s "
                             "UNION ALL SELECT tableoid::regclass::text FROM sender_send_log WHERE email_id = %s",
                             (row, row)).fetchall()
        assert sorted(where) == [(_month_name("sender_events", JUNE),), (_month_name("sender_send_log", JUNE),)]
        assert conn.execute("SELECT count(*) FROM sender_events_default").fetchone() == (0,)
        assert _event_counts(conn) == counts  # moved, not new: the counters did not change
        # the moved month is a partition like any other: the next entry of June goes straight to it
        conn.execute("SELECT sender_event(%s, 'note', 'later in June', %s)", (row, JUNE + timedelta(days=5)))
        assert conn.execute("SELECT count(*) FROM sender_events_default").fetchone() == (0,)


def test_a_month_made_while_a_send_is_recorded_waits_for_it_and_never_deadlocks(
        ledger: Ledger, database_url: str) -> None:
    """sender_record_sent writes the send log, then the history; the month's maker locks the two in that order,
    so it waits for the send to commit. In the other order each waited for the other, and PostgreSQL cancelled one:
    perhaps the record of a message already handed over."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        row = _sent(conn, "L1", JUNE)  # in DEFAULT: June is the month to make
    made: list[int] = []
    with psycopg.connect(database_url) as writer, psycopg.connect(database_url, autocommit=True) as watcher:
        writer.execute("SET lock_timeout = '5s'")
        writer.execute("LOCK TABLE sender_send_log IN ROW EXCLUSIVE MODE")  # a send between its two writes
        maker = threading.Thread(target=lambda: made.append(make_partitions(ledger)))
        maker.start()
        for _ in range(500):  # until the maker waits for the writer's lock
            if watcher.execute("SELECT count(*) FROM pg_locks WHERE NOT granted").fetchone() != (0,):
                break
            threading.Event().wait(0.01)
        else:
            pytest.fail("the maker never waited for the send log")
        writer.execute("SELECT sender_event(%s, 'note', 'the second write of the send')", (row,))
        writer.commit()
        maker.join(timeout=30)
    assert made == [2]  # June of each table


def test_the_send_log_keeps_one_entry_per_row(ledger: Ledger, database_url: str) -> None:
    with psycopg.connect(database_url, autocommit=True) as conn:
        row = _sent(conn, "L1", datetime.now(UTC))
        assert conn.execute("SELECT sender_record_sent(%s, 'again', NULL)", (row,)).fetchone() == (False,)
        with pytest.raises(psycopg.errors.UniqueViolation, match="sender_sent_pkey"):
            conn.execute("INSERT INTO sender_send_log (email_id, message_id, mailbox) VALUES (%s, 'x', 'y')", (row,))
        assert conn.execute("SELECT count(*) FROM sender_send_log").fetchone() == (1,)


def test_retire_history_drops_old_months_and_keeps_counts_and_the_sequence_rules(
        ledger: Ledger, database_url: str, retire: Cli) -> None:
    with psycopg.connect(database_url, autocommit=True) as conn:
        june_row = _sent(conn, "L1", JUNE)
        _sent(conn, "L2", JULY)
        make_partitions(ledger)
        counts = _event_counts(conn)
        rows = ledger.counts()

    result = retire("--before", "2025-07-01")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["2025-06: dropped 3 history entries and 1 send-log entries"]

    with psycopg.connect(database_url, autocommit=True) as conn:
        assert _month_name("sender_events", JUNE) not in _months(conn, "sender_events")
        assert _month_name("sender_send_log", JUNE) not in _months(conn, "sender_send_log")
        assert _month_name("sender_events", JULY) in _months(conn, "sender_events")
        assert conn.execute("SELECT count(*) FROM sender_events WHERE email_id = %s", (june_row,)).fetchone() == (0,)
        assert _event_counts(conn) == counts
        conn.execute("SELECT sender_recount()")  # a recount from the rows there still counts the retired entries
        assert _event_counts(conn) == counts
        assert ledger.counts() == rows
        # what step 2 is timed and routed from (its step 1's accepted time and mailbox) outlives the send log's month
        assert conn.execute("SELECT outcome FROM sender_enqueue('L1', 2, 'l1@example.com', 'sales', 'Re', 'Again', %s)",
                            (JUNE,)).fetchone() == ("queued",)
        assert conn.execute("SELECT pinned_mailbox, due_at FROM sender_emails WHERE step = 2 "
                            "AND lead_id = (SELECT id FROM sender_leads WHERE lead = 'L1')"
                            ).fetchone() == (MAILBOX, JUNE + timedelta(minutes=1))

    again = retire("--before", "2025-07-01", "--format", "json")
    assert again.returncode == 0, again.stderr
    assert '"retired": []' in again.stdout


def test_retire_history_rounds_a_day_down_to_its_month(ledger: Ledger, database_url: str, retire: Cli) -> None:
    """And it retires entries that were in DEFAULT, as its month is made first (no make_partitions here)."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        _sent(conn, "L1", JUNE)
        assert conn.execute("SELECT count(*) FROM sender_events_default").fetchone() == (3,)
    result = retire("--before", "2025-07-20")
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip() == ("--before 2025-07-20 is not a month's first day: retiring the months before "
                                     "2025-07-01")
    assert result.stdout.splitlines() == ["2025-06: dropped 3 history entries and 1 send-log entries"]


@pytest.mark.parametrize("status", ["sending", "unconfirmed"])
def test_retire_history_refuses_a_month_holding_a_row_not_settled(
        ledger: Ledger, database_url: str, retire: Cli, status: str) -> None:
    with psycopg.connect(database_url, autocommit=True) as conn:
        _sent(conn, "L1", JUNE)
        assert conn.execute("SELECT outcome FROM sender_enqueue('L9', 1, 'l9@example.com', 'sales', 'Hi', 'x', NULL, "
                            "p_now => %s)", (JULY,)).fetchone() == ("queued",)
        (row,) = conn.execute("SELECT id FROM sender_claim('w1', 1, NULL, NULL, %s)", (JULY,)).fetchone() or (None,)
        if status == "unconfirmed":
            conn.execute("SELECT sender_settle(%s, 'unconfirmed', 'timeout after DATA', 0, 5, %s)", (row, JULY))
        make_partitions(ledger)
        before = conn.execute("SELECT count(*) FROM sender_events").fetchone()

    result = retire("--before", "2025-08-01")
    assert result.returncode == 1
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "month 2025-07 holds the history of 1 row(s) still sending or unconfirmed" in lines[0]
    with psycopg.connect(database_url) as conn:  # all or nothing: June was not dropped either
        assert conn.execute("SELECT count(*) FROM sender_events").fetchone() == before
        assert _month_name("sender_events", JUNE) in _months(conn, "sender_events")


@pytest.mark.parametrize("before", ["last tuesday", "2025-13-01", "3000-01-01"])
def test_retire_history_refuses_bad_input_in_one_line(retire: Cli, before: str) -> None:
    result = retire("--before", before)
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "--before" in result.stderr


def test_the_agent_makes_the_months_at_its_start(world: World) -> None:
    """An entry that landed in DEFAULT (its month was not made) is in its month once the agent has started, and what
    the agent sends lands in this month's partitions, never in DEFAULT."""
    world.enqueue(1)
    with psycopg.connect(world.database_url, autocommit=True) as conn:
        (row,) = conn.execute("SELECT id FROM sender_emails").fetchone() or (None,)
        conn.execute("SELECT sender_event(%s, 'note', 'from a month not made', %s)", (row, JUNE))
        assert conn.execute("SELECT count(*) FROM sender_events_default").fetchone() == (1,)
    agent, factory = world.agent()
    (report,) = agent.run(factory, 1, once=True, stop=threading.Event())
    assert report.kind == "sent"
    with psycopg.connect(world.database_url) as conn:
        assert conn.execute("SELECT count(*) FROM sender_events_default").fetchone() == (0,)
        assert conn.execute("SELECT count(*) FROM sender_send_log_default").fetchone() == (0,)
        assert conn.execute("SELECT tableoid::regclass::text FROM sender_events WHERE kind = 'note'").fetchone() == (
            _month_name("sender_events", JUNE),)
        assert conn.execute("SELECT tableoid::regclass::text FROM sender_send_log").fetchone() == (
            _month_name("sender_send_log", datetime.now(UTC)),)


def test_a_version_12_ledger_keeps_its_history_in_its_months(postgres_admin: str) -> None:
    """Migration 13 copies every entry into a month made for it (none in DEFAULT), keeps the events' ids going
    on, fills sender_sent from the send log, and leaves the counters as they were."""
    with fresh_database(postgres_admin) as url:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(query("versions_table"))
            for number, name, text in migrations():
                if number <= 12:
                    with conn.transaction():
                        conn.execute(text)
                        conn.execute(query("record_version"), {"version": number, "name": name})
            row = _sent(conn, "L1", JUNE)
            _sent(conn, "L2", JULY)
            counts = _event_counts(conn)
            (last_id,) = conn.execute("SELECT max(id) FROM sender_events").fetchone() or (0,)
        with Ledger.from_url(url) as ledger:
            # 13 and every migration after it, in order: a later one must not hide 13's work
            assert ledger.migrate().applied == tuple(name for number, name, _ in migrations() if number > 12)
            assert ledger.migrate().applied == ()
        with psycopg.connect(url, autocommit=True) as conn:
            assert conn.execute("SELECT count(*) FROM sender_events_default").fetchone() == (0,)
            assert conn.execute("SELECT count(*) FROM sender_send_log_default").fetchone() == (0,)
            assert {name for (name,) in conn.execute(
                "SELECT DISTINCT tableoid::regclass::text FROM sender_events")} == {
                _month_name("sender_events", JUNE), _month_name("sender_events", JULY)}
            assert conn.execute("SELECT email_id, mailbox FROM sender_sent WHERE email_id = %s", (row,)
                                ).fetchone() == (row, MAILBOX)
            assert _event_counts(conn) == counts
            conn.execute("SELECT sender_event(%s, 'note', '', NULL)", (row,))
            assert conn.execute("SELECT max(id) FROM sender_events").fetchone() == (last_id + 1,)
