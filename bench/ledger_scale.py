"""What `/metrics` and `sender status` cost on a small ledger and on a big one, before and after the ledger's counters
(version 10), in the same run (issue 30: within 2x from 10,000 to 10,000,000 rows).

    python -m bench.ledger_scale [--small 10000] [--big 1000000] [--queued N] [--times 7] [--database-url URL]

Two fresh ledgers built with COPY (triggers off while copying, as a restore does; then sender_recount, what the
upgrade to version 10 runs, starts the counters from the rows copied), each row a lead of `enqueue` with its step 1:
  - the same last 7 days in both: 2,000 rows sent by 20 mailboxes (send-log entries, a `sent` event each), some
    bounced and complained about (feedback), 200 queued and due;
  - the rest is history: rows sent, delivered, failed, cancelled or bounced 30 to 400 days ago with their send-log
    entries, two events each, and 1% of them still queued for later.
So what grows is the ledger's history, not the 7 days the health window reads. `--queued N` adds N rows queued
to the big ledger (the small one gets the same share of its size), the hard cases for the claim's index walk: half
not due yet (due in 1 to 30 days, as sender_enqueue makes a row whose not_before is later), half due for the last
1 to 29 days in a mailbox group (`support`) the claiming agent does not serve, all due before the rows it serves.
Timed on each, median of T runs after one to warm the cache:
  metrics before   the snapshot /metrics serves (LedgerCollector.collect's queries) as version 9 ran them:
                   count(*) of sender_emails by status and of sender_events by kind (kept here as the baseline),
                   the health window without version 10's indexes (dropped meanwhile);
  metrics after    LedgerCollector.collect as it is, reading the counters;
  status before    what `sender status` reads (the rows per status, then the mailboxes' health in a connection of
                   its own, as toolkit.cli.sender.ledger does), as version 9 did;
  status after     the same through Ledger.counts, reading the counters;
  claim            Ledger.claim of one row for an agent serving `sales`, rolled back (each claim finds the same
                   ledger), with what its statements read per claim: index entries (pg_stat_user_indexes'
                   idx_tup_read), index blocks and table blocks (pg_statio_user_*), summed over every table of the
                   ledger so that no table's layout or index name matters (pg_stat_force_next_flush after each).
Prints each median, the build's times, and the ratios big / small.
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

from bench.postgres import admin_url, fresh_database

# The version-9 queries (sql/queries.sql `status_counts`, `event_counts` before the counters): the baseline.
OLD_STATUS_COUNTS = "SELECT status::text, count(*) FROM sender_emails GROUP BY status"
OLD_EVENT_COUNTS = "SELECT kind, count(*) FROM sender_events GROUP BY kind"
# What version 10 added for the health window (migrations/10_1_counters.sql): dropped while the baseline runs.
VERSION_10_INDEXES = ("CREATE INDEX sender_send_log_accepted ON sender_send_log (accepted_at)",
                      "CREATE INDEX sender_feedback_occurred ON sender_feedback (occurred_at)")
RECENT_SENT, RECENT_DUE, MAILBOXES = 2_000, 200, 20
SERVED, OTHER_GROUP = "sales", "support"  # the claiming agent's mailbox group; one it does not serve
HISTORY = (("sent", 60), ("delivered", 20), ("failed", 8), ("cancelled", 6), ("bounced", 5), ("queued", 1))
CHUNK = 50_000
COPIED_TABLES = ["sender_leads", "sender_emails", "sender_send_log", "sender_events", "sender_feedback"]
# Their indexes that back no constraint (a key, a unique column): dropped before the COPY, built after it.
SECONDARY_INDEXES = ("SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = current_schema() "
                     "AND tablename = ANY (%s) AND indexname NOT IN (SELECT conname FROM pg_constraint)")
NULL = "\\N"  # COPY's


def _history_status(n: int) -> str:
    """The status of history row `n`, in HISTORY's shares of every 100."""
    slot, at = n % 100, 0
    for status, share in HISTORY:
        at += share
        if slot < at:
            return status
    raise AssertionError("HISTORY's shares add up to 100")


def _rows(size: int, now: datetime) -> Iterator[tuple[int, str, datetime | None, str | None, list[str]]]:
    """(row id, status, accepted_at or None, mailbox, event kinds) of each of `size` rows, history first."""
    history = size - RECENT_SENT - RECENT_DUE
    for n in range(history):
        status = _history_status(n)
        at = now - timedelta(days=30 + n % 370, seconds=n % 86_400)
        if status == "queued":
            yield n + 1, status, None, None, ["queued"]
        elif status in ("failed", "cancelled"):
            yield n + 1, status, None, f"box{n % MAILBOXES}@sender.example", ["attempt", status]
        else:
            yield n + 1, status, at, f"box{n % MAILBOXES}@sender.example", ["attempt", "sent"]
    for k in range(RECENT_SENT):
        at = now - timedelta(seconds=(k * 300) % (6 * 86_400))
        yield history + k + 1, "sent", at, f"box{k % MAILBOXES}@sender.example", ["attempt", "sent"]
    for k in range(RECENT_DUE):
        yield history + RECENT_SENT + k + 1, "queued", None, None, ["queued"]


def _queued(start: int, count: int, now: datetime) -> Iterator[tuple[int, str, datetime]]:
    """(row id, mailbox group, not_before = due_at) of `count` queued rows from id `start` (see --queued): the first
    half not due yet, the second due in OTHER_GROUP, longer than the served group's rows."""
    later = count - count // 2
    for k in range(count):
        if k < later:
            yield start + k, SERVED, now + timedelta(days=1 + k % 29, seconds=k % 86_400)
        else:
            yield start + k, OTHER_GROUP, now - timedelta(days=1 + k % 28, seconds=k % 86_400)


def _copy(conn: Any, sql: str, lines: Iterator[str]) -> None:
    began = time.perf_counter()
    with conn.cursor().copy(sql) as copy:
        buffer = io.StringIO()
        for count, line in enumerate(lines, 1):
            buffer.write(line)
            if count % CHUNK == 0:
                copy.write(buffer.getvalue())
                buffer = io.StringIO()
        copy.write(buffer.getvalue())
    print(f"    {sql.split()[1]} copied in {time.perf_counter() - began:.0f} s", flush=True)


def build(url: str, size: int, queued: int = 0) -> None:
    """A ledger of `size` rows and `queued` more at `url` (see the module's docstring)."""
    import psycopg

    from sender import Ledger

    with Ledger.from_url(url) as ledger:
        ledger.migrate()
    now = datetime.now(UTC)
    far = (now + timedelta(days=30)).isoformat()
    # not_before and due_at: a row queued for later is due when its not_before comes, as sender_enqueue writes it
    later, due_now = f"{far}\t{far}", f"{now.isoformat()}\t{now.isoformat()}"
    with psycopg.connect(url, autocommit=True) as conn:
        (campaign,) = conn.execute("SELECT id FROM sender_campaigns WHERE name = 'enqueue'").fetchone() or (0,)
        # As a restore does: the indexes no constraint needs are built once after the COPY, not entry by entry
        # during it (at 10,000,000 rows, the difference between minutes and more than an hour).
        secondary = conn.execute(SECONDARY_INDEXES, (COPIED_TABLES,)).fetchall()
        for name, _definition in secondary:
            conn.execute(f"DROP INDEX {name}")
        conn.execute("SET session_replication_role = replica")  # no trigger, no key check: a restore's COPY
        _copy(conn, "COPY sender_leads (id, campaign_id, kind, lead, address) FROM STDIN",  # lead n is row n's
              (f"{n}\t{campaign}\tenqueue\tL{n}\tl{n}@rcpt.example\n" for n in range(1, size + queued + 1)))
        emails = ("COPY sender_emails (id, campaign_id, lead_id, step, address, mailbox_group, subject, body, status, "
                  "not_before, due_at, message_id, mailbox, attempt_started_at, attempts) FROM STDIN")
        _copy(conn, emails,
              (f"{i}\t{campaign}\t{i}\t1\tl{i}@rcpt.example\t{SERVED}\tHello\tHi there\t{status}\t"
               f"{later if status == 'queued' and i <= size - RECENT_DUE else due_now}\t"
               f"{f'<{i}@bench.example>' if mailbox else NULL}\t{mailbox or NULL}\t"
               f"{at.isoformat() if at else NULL}\t{1 if mailbox else 0}\n"
               for i, status, at, mailbox, _kinds in _rows(size, now)))
        _copy(conn, emails,
              (f"{i}\t{campaign}\t{i}\t1\tl{i}@rcpt.example\t{group}\tHello\tHi there\tqueued\t{at.isoformat()}\t"
               f"{at.isoformat()}\t{NULL}\t{NULL}\t{NULL}\t0\n" for i, group, at in _queued(size + 1, queued, now)))
        _copy(conn, "COPY sender_send_log (email_id, message_id, mailbox, accepted_at) FROM STDIN",
              (f"{i}\t<{i}@bench.example>\t{mailbox}\t{at.isoformat()}\n"
               for i, _status, at, mailbox, _kinds in _rows(size, now) if at is not None))
        _copy(conn, "COPY sender_events (email_id, kind) FROM STDIN",
              (f"{i}\t{kind}\n" for i, _status, _at, _mailbox, kinds in _rows(size, now) for kind in kinds))
        _copy(conn, "COPY sender_events (email_id, kind) FROM STDIN",
              (f"{i}\tqueued\n" for i, _group, _at in _queued(size + 1, queued, now)))
        _copy(conn, "COPY sender_feedback (email_id, event, source, ref, mailbox, occurred_at) FROM STDIN",
              (f"{i}\t{'bounced' if status == 'bounced' or i % 50 == 0 else 'complained'}\tinbox\tr{i}\t{mailbox}\t"
               f"{at.isoformat()}\n"
               for i, status, at, mailbox, _kinds in _rows(size, now)
               if at is not None and (status == "bounced" or i % 50 == 0 or i % 97 == 0)))
        conn.execute("SET session_replication_role = origin")
        began = time.perf_counter()
        conn.execute("SET maintenance_work_mem = '256MB'")
        for _name, definition in secondary:
            conn.execute(definition)
        print(f"    {len(secondary)} secondary indexes built in {time.perf_counter() - began:.0f} s", flush=True)
        conn.execute("SELECT setval(pg_get_serial_sequence('sender_emails', 'id'), %s)", (size + queued,))
        conn.execute("SELECT setval(pg_get_serial_sequence('sender_leads', 'id'), %s)", (size + queued,))
        began = time.perf_counter()
        conn.execute("SELECT sender_recount()")
        print(f"    counters recounted in {time.perf_counter() - began:.0f} s", flush=True)
        began = time.perf_counter()
        conn.execute("VACUUM ANALYZE")
        print(f"    vacuumed and analyzed in {time.perf_counter() - began:.0f} s", flush=True)


def version_9_indexes(url: str, before: bool) -> None:
    """Without the health window's indexes (`before`: what version 9 had), or with them again."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        for statement in VERSION_10_INDEXES:
            conn.execute(f"DROP INDEX {statement.split()[2]}" if before else statement)
        conn.execute("ANALYZE sender_send_log, sender_feedback")


def old_snapshot(url: str) -> None:
    """The queries of LedgerCollector.collect with the version-9 counts."""
    import psycopg

    from sender.feedback.health import WINDOW
    from sender.ledger.events import Feedback
    from sender.ledger.queries import query
    from sender.ledger.store import Ledger

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(OLD_STATUS_COUNTS).fetchall()
        conn.execute(query("oldest_due_age"), {"now": None}).fetchone()
        conn.execute(OLD_EVENT_COUNTS).fetchall()
        Feedback(Ledger(conn)).health_since(datetime.now(UTC) - WINDOW)


def new_snapshot(pool: Any) -> Callable[[], None]:
    from sender.feedback.metrics import LedgerCollector

    collector = LedgerCollector(pool)

    def collect() -> None:
        metrics = list(collector.collect())
        up = next(m for m in metrics if m.name.endswith("ledger_up"))
        assert up.samples[0].value == 1, "the ledger did not answer the scrape"
    return collect


def status(url: str, counted: bool) -> None:
    """What `sender status` reads: rows per status (the counters, or the version-9 count), then the health."""
    from sender import Ledger
    from toolkit.cli.mailbox_health import read_view

    with Ledger.from_url(url) as ledger:
        if counted:
            ledger.counts()
        else:
            ledger._conn.execute(OLD_STATUS_COUNTS).fetchall()
    view = read_view(url)
    assert view.counts is not None, view.unavailable


# What the ledger's statements have read so far: index entries and blocks per index, table blocks per table
# (partitions included: each is a table of its own here).
INDEX_READS = ("SELECT s.indexrelname, s.idx_tup_read, io.idx_blks_hit + io.idx_blks_read FROM pg_stat_user_indexes s "
               "JOIN pg_statio_user_indexes io USING (indexrelid)")
TABLE_READS = "SELECT coalesce(sum(heap_blks_hit + heap_blks_read), 0) FROM pg_statio_user_tables"
CLAIM_READS = ("claim index entries", "claim index blocks", "claim table blocks")
# The claim's own statement timeout is the ledger's (15 s); the bench measures a walk longer than that too, and
# says so, rather than fail on it.
CLAIM_TIMEOUT_MS = 600_000


def _reads(stats: Any) -> tuple[dict[str, tuple[int, int]], int]:
    indexes = {name: (int(entries), int(blocks)) for name, entries, blocks in stats.execute(INDEX_READS)}
    (table_blocks,) = stats.execute(TABLE_READS).fetchone() or (0,)
    return indexes, int(table_blocks)


def claims(url: str, times: int) -> dict[str, float]:
    """The median time of a claim of one row (the claim query Ledger.claim runs) for an agent serving SERVED and its
    mailboxes, each
    rolled back, and what one reads (CLAIM_READS), the mean of `times` claims after one to warm the cache."""
    import psycopg

    from sender.ledger.connection import STATEMENT_TIMEOUT_MS, set_local_timeout
    from sender.ledger.queries import query

    params = {"worker": "bench", "limit": 1, "groups": [SERVED], "now": None,
              "mailboxes": [f"box{n}@sender.example" for n in range(MAILBOXES)]}  # the agent passes its mailboxes
    with psycopg.connect(url, autocommit=True) as conn, psycopg.connect(url, autocommit=True) as stats:

        def claim() -> float:
            began = time.perf_counter()
            with conn.transaction(force_rollback=True):  # the next claim finds the same ledger
                set_local_timeout(conn, CLAIM_TIMEOUT_MS)
                claimed = conn.execute(query("claim"), params).fetchall()
            seconds = time.perf_counter() - began
            assert claimed, "the claim found no due row"
            # its reads reach the statistics when the session goes idle after this, not a second later
            conn.execute("SELECT pg_stat_force_next_flush()")
            return seconds

        claim()
        (indexes_before, table_before) = _reads(stats)
        seconds = [claim() for _ in range(times)]
        (indexes_after, table_after) = _reads(stats)
    deltas = {name: (entries - indexes_before.get(name, (0, 0))[0], blocks - indexes_before.get(name, (0, 0))[1])
              for name, (entries, blocks) in indexes_after.items()}
    most = max(deltas, key=lambda name: deltas[name][0])
    median = statistics.median(seconds) * 1000
    print(f"    most read index: {most}, {deltas[most][0] / times:.1f} entries a claim"
          + (f"; the median claim took longer than the ledger's statement timeout ({STATEMENT_TIMEOUT_MS / 1000:.0f} "
             "s): the agent's claim would be cancelled" if median > STATEMENT_TIMEOUT_MS else ""), flush=True)
    return {"claim": median,
            "claim index entries": sum(entries for entries, _ in deltas.values()) / times,
            "claim index blocks": sum(blocks for _, blocks in deltas.values()) / times,
            "claim table blocks": (table_after - table_before) / times}


def median_ms(run: Callable[[], object], times: int) -> float:
    run()
    seconds = []
    for _ in range(times):
        began = time.perf_counter()
        run()
        seconds.append(time.perf_counter() - began)
    return statistics.median(seconds) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--small", type=int, default=10_000)
    parser.add_argument("--big", type=int, default=1_000_000)
    parser.add_argument("--queued", type=int, default=0,
                        help="rows queued added to the big ledger, not due or due in a group the claim does not serve "
                             "(the small one gets the same share)")
    parser.add_argument("--times", type=int, default=7, help="runs of each measure per ledger (median)")
    parser.add_argument("--database-url", help="an admin URL of a PostgreSQL that may create databases")
    args = parser.parse_args()
    if args.small < RECENT_SENT + RECENT_DUE + 100 or args.big < args.small:
        raise SystemExit(f"bench: --small must be at least {RECENT_SENT + RECENT_DUE + 100} and --big at least "
                         "--small")
    if args.queued < 0 or args.times < 1:
        raise SystemExit("bench: --queued must be 0 or more and --times at least 1")

    from sender.feedback.web import open_pool

    admin = admin_url(args.database_url)
    timed = ("metrics before", "metrics after", "status before", "status after", "claim")
    results: dict[int, dict[str, float]] = {}
    for size in (args.small, args.big):
        queued = args.queued * size // args.big
        with fresh_database(admin, "scale") as url:
            print(f"{size:,} rows and {queued:,} queued:", flush=True)
            began = time.perf_counter()
            build(url, size, queued)
            print(f"  built in {time.perf_counter() - began:.0f} s", flush=True)
            with open_pool(url, size=2) as pool:
                version_9_indexes(url, True)
                results[size] = {
                    "metrics before": median_ms(lambda: old_snapshot(url), args.times),
                    "status before": median_ms(lambda: status(url, counted=False), args.times),
                }
                version_9_indexes(url, False)
                results[size].update({
                    "metrics after": median_ms(new_snapshot(pool), args.times),
                    "status after": median_ms(lambda: status(url, counted=True), args.times),
                })
            results[size].update(claims(url, args.times))  # last: its rolled-back claims leave dead rows
            print("  " + ", ".join(f"{m} {results[size][m]:.1f} ms" for m in timed) + "; a claim reads "
                  + ", ".join(f"{results[size][m]:.1f} {m.removeprefix('claim ')}" for m in CLAIM_READS), flush=True)

    small, big = results[args.small], results[args.big]
    print(f"\nmedian of {args.times} runs, ms (a claim's reads: the mean of {args.times}):")
    print(f"  {'':20s}{args.small:>12,}{args.big:>12,}{'big/small':>11s}")
    for measure in (*timed, *CLAIM_READS):
        ratio = f"{big[measure] / small[measure]:10.2f}x" if small[measure] else f"{'-':>11s}"
        print(f"  {measure:20s}{small[measure]:12.1f}{big[measure]:12.1f}{ratio}")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    main()
