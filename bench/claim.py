"""The claim's cost before and after ledger v6, measured in the same run, on the same server (issue 24).

    python -m bench.claim [--claims N] [--rounds R] [--ledger-leads L] [--database-url URL]

Version 6's claim (sql/queries.sql `claim`) returns with each row its lead's merge fields (a join of sender_leads)
and the lead's earlier steps (a read of sender_emails), and takes the agent's mailboxes; version 5's returned the
row alone. A fresh database per phase (a claim walks the queue's index from its oldest entry, so no phase walks
past another's claims): one at version 5 (migrations 1_0 to 5_1, what a v5 ledger is), the others at version 6
(schema.sql), their queues filled with sender_enqueue, beside a backlog of L rows that are not due (on v6, the
leads of a campaign not started, added with add_leads; on v5, cancelled rows): a claim's cost may grow with
the ledger, not only with the queue. Each round, one after another from one connection each, N claims of one
row (as the agent claims) per phase:
  select1   bare `SELECT 1` round trips: the floor of any call;
  v5        v5's claim query, on the v5 ledger;
  v6 bare   v6's sender_claim alone (no lead, no earlier steps), step-1 rows;
  v6        v6's claim (Ledger.claim) of step-1 rows: the lead joined, no earlier step to read;
  v6 step2  v6's claim of step-2 rows whose step 1 was sent (one earlier step read), with the agent's mailboxes;
  uncounted v6's claim as `v6`, on a ledger whose counters' triggers (version 10) are off: what counting costs a
            claim (ratio v6 / uncounted).
Each phase's claims/s and its backend's CPU per claim (from /proc: only when the server runs here); the ratios,
each with the range of its rounds, print last.
"""

from __future__ import annotations

import argparse
import os
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from statistics import median
from typing import Any

from bench.postgres import admin_url, cpu_seconds, fresh_database

PHASES = ("select1", "v5", "v6 bare", "v6", "v6 step2", "uncounted")
# The ledger's counters (version 10) as a claim pays them: the triggers that append a line per status change and
# per history entry. The `uncounted` ledger has them off, the rest as schema.sql makes them.
COUNTER_TRIGGERS = ("ALTER TABLE sender_emails DISABLE TRIGGER sender_count_rows, "
                    "DISABLE TRIGGER sender_count_row_status",
                    "ALTER TABLE sender_events DISABLE TRIGGER sender_count_event")
MAILBOX = "box@bench.example"
ENQUEUE = """SELECT sender_enqueue(%(prefix)s || n, %(step)s, 'lead-' || lower(%(prefix)s) || n || '@rcpt.example',
                                  'bench', 'Hello',
                                  'Hi there', NULL, NULL)
             FROM generate_series(1, %(rows)s) AS n"""
# Version 5's claim query (sql/queries.sql `claim` before v6), against a v5 ledger's sender_claim.
V5_CLAIM = """SELECT id, lead, step, recipient, mailbox_group, subject, body, attempts, idempotency_key, message_id,
                     attempt_id
              FROM sender_claim(%(worker)s, %(limit)s, %(groups)s, %(now)s)"""
BACKLOG_CAMPAIGN = """\
name: backlog
group: backlog
fields: [first_name]
steps:
  - subject: "Hello {first_name|there}"
    body: "Hi {first_name|there}"
"""
V6_BARE_CLAIM = "SELECT id FROM sender_claim(%(worker)s, %(limit)s, %(groups)s, NULL, %(now)s)"


@contextmanager
def database(admin: str, version: int) -> Iterator[str]:
    """A fresh database at schema `version` (5: the migrations up to 5; 6: schema.sql, the current one)."""
    import psycopg

    from sender.ledger.queries import migrations

    with fresh_database(admin, "claim") as url, psycopg.connect(url, autocommit=True) as conn:
        if version == 6:
            from sender import Ledger

            with Ledger.from_url(url) as ledger:
                ledger.migrate()
        else:
            for file_version, _name, text in migrations():
                if file_version <= version:
                    conn.execute(text)
        yield url


def backlog(url: str, version: int, leads: int) -> None:
    """`leads` rows that are not due: a draft campaign's (v6), cancelled rows (v5)."""
    import psycopg

    if version == 5:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(ENQUEUE.replace("'bench'", "'backlog'"), {"prefix": "B", "step": 1, "rows": leads})
            conn.execute("UPDATE sender_emails SET status = 'cancelled' WHERE mailbox_group = 'backlog'")
        return
    import tempfile

    from sender import Ledger
    from sender.campaigns.leads import Lead
    from sender.campaigns.spec import load_campaign
    from sender.ledger.campaigns import Campaigns

    with tempfile.TemporaryDirectory() as workdir, Ledger.from_url(url) as ledger:
        path = Path(workdir) / "backlog.yml"
        path.write_text(BACKLOG_CAMPAIGN)
        campaigns = Campaigns(ledger)
        campaigns.apply(load_campaign(path, {"backlog"}), path.read_text())
        campaigns.add_leads("backlog", [Lead(n + 2, f"backlog{n}@rcpt.example", f"crm-{n}", "UTC",
                                             {"first_name": f"Name{n}"}) for n in range(leads)])


def fill(url: str, rows: int, step2: bool) -> None:
    """`rows` step-1 rows in the queue; with `step2`, each sent (claimed, attempted, recorded), and a step 2
    enqueued behind it."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(ENQUEUE, {"prefix": "L", "step": 1, "rows": rows})
    if step2:
        from sender import Ledger

        with Ledger.from_url(url) as ledger:
            while claimed := ledger.claim("setup", 100, ["bench"]):
                for row in claimed:
                    ledger.begin_attempt(row.id, uuid.uuid4(), MAILBOX, None, f"<{uuid.uuid4()}@bench.example>",
                                         "Hello")
                    ledger.record_sent(row.id, "250 ok")
            ledger._conn.execute(ENQUEUE, {"prefix": "L", "step": 2, "rows": rows})
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")


def timed(conn: Any, count: int, call: Callable[[], Any]) -> tuple[float, float]:
    """(calls/s, backend CPU µs per call) of `count` calls."""
    pid = conn.info.backend_pid
    began, cpu = time.perf_counter(), cpu_seconds(pid)
    for _ in range(count):
        if not call():
            raise SystemExit("bench: a claim found the queue empty")
    return count / (time.perf_counter() - began), (cpu_seconds(pid) - cpu) / count * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--claims", type=int, default=1000, help="per phase and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--ledger-leads", type=int, default=50_000, help="rows of each ledger that are not due")
    parser.add_argument("--database-url", help="an admin URL of a PostgreSQL that may create databases")
    args = parser.parse_args()

    import psycopg

    from sender import Ledger

    admin = admin_url(args.database_url)
    rows = args.claims * args.rounds
    rates: dict[str, list[float]] = {phase: [] for phase in PHASES}
    cpu: dict[str, list[float]] = {phase: [] for phase in PHASES}
    with ExitStack() as stack:
        urls = {phase: stack.enter_context(database(admin, 5 if phase == "v5" else 6)) for phase in PHASES[1:]}
        for phase, url in urls.items():
            backlog(url, 5 if phase == "v5" else 6, args.ledger_leads)
            fill(url, rows, step2=phase == "v6 step2")
        with psycopg.connect(urls["uncounted"], autocommit=True) as conn:
            for statement in COUNTER_TRIGGERS:
                conn.execute(statement)
        v5 = stack.enter_context(psycopg.connect(urls["v5"], autocommit=True))
        bare, step1, step2, uncounted = (stack.enter_context(Ledger.from_url(urls[p]))
                                         for p in ("v6 bare", "v6", "v6 step2", "uncounted"))
        params = {"worker": "bench", "limit": 1, "groups": ["bench"], "now": None}
        calls: dict[str, tuple[Any, Callable[[], Any]]] = {
            "select1": (v5, lambda: v5.execute("SELECT 1").fetchone()),
            "v5": (v5, lambda: v5.execute(V5_CLAIM, params).fetchall()),
            "v6 bare": (bare._conn, lambda: bare._conn.execute(V6_BARE_CLAIM, params).fetchall()),
            "v6": (step1._conn, lambda: step1.claim("bench", 1, ["bench"])),
            "v6 step2": (step2._conn, lambda: [row for row in step2.claim("bench", 1, ["bench"], [MAILBOX])
                                               if row.step == 2 and len(row.earlier) == 1]),
            "uncounted": (uncounted._conn, lambda: uncounted.claim("bench", 1, ["bench"])),
        }
        for round_no in range(args.rounds):
            for phase in PHASES:
                conn, call = calls[phase]
                rate, per_claim = timed(conn, args.claims, call)
                rates[phase].append(rate)
                cpu[phase].append(per_claim)
            print(f"round {round_no + 1}: " + ", ".join(f"{p} {rates[p][-1]:,.0f}/s" for p in PHASES), flush=True)

    print(f"\n{args.claims} claims of one row per phase and round, ledgers of {args.ledger_leads:,} more rows "
          f"(median of {args.rounds} rounds):")
    print(f"  {'':10s}{'calls/s':>9s}{'backend CPU µs/call':>21s}")
    for phase in PHASES:
        print(f"  {phase:10s}{median(rates[phase]):9,.0f}{median(cpu[phase]):21.0f}")
    print()
    for phase, base in (("v6", "uncounted"), ("v6", "v5"), ("v6 step2", "v5"), ("v6", "v6 bare"), ("v5", "select1"),
                        ("v6", "select1")):
        ratios = [r / b for r, b in zip(rates[phase], rates[base], strict=True)]
        print(f"ratio {phase} / {base}: {median(ratios):.2f}x (rounds {min(ratios):.2f}-{max(ratios):.2f}x)")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    main()
