"""Throughput of the lead import (Campaigns.add_leads) against a plain COPY of the same rows, in the same run.

    python -m bench.import [--leads N] [--rounds R] [--database-url URL]

A leads CSV of N rows (address, lead, timezone, first_name, company, as leads.example.csv; a sixth of the time zones
empty, a sixth not IANA names) is written once and read with read_leads R times on its own: the CSV to Lead
objects. The parsed leads (what add-leads hands the ledger once the file is checked) then go to a fresh database
each round (its campaigns are campaign.example.yml's), as:
  copy     the baseline: one COPY of the same rows (line, address, lead, timezone, fields as JSON: the staging
           table's columns, made by the import's own staged_row from the same Lead objects) into an unindexed
           table, committed;
  staging  the import's first half alone: its temporary staging table created and filled by that COPY, committed;
  import   Campaigns.add_leads into a draft campaign: the staging COPY, then sender_add_leads (each row
           classified already / suppressed / in another active campaign / added; the leads, their step-1 rows and
           those rows' history written), committed;
  again    the same leads added to the same campaign again: every one added before is `already` (a file added
           twice);
and three floors, each the staging COPY and then the rows the import wrote (as many leads, their step-1 rows,
their history events) written by INSERT ... SELECT from the staging table, deciding nothing, into copies of the
ledger's three tables:
  rows     with no index and no constraint: the rows alone;
  indexed  with the ledger's indexes, unique constraints and checks;
  keyed    and its foreign keys too: what storing the import's rows costs, the best any import on this
           schema can do. import - keyed is then the classification's cost (and the function's own).
The ledger is not empty: a running campaign holds 1% of the addresses (`other_campaign`), 1,000 address and 20
domain suppressions hit others (`suppressed`). Per phase: wall time, this process's CPU time, its PostgreSQL
backend's (read from /proc: only when the server runs on this machine), and the WAL the server wrote meanwhile
(the server's, every session's: exact only on a server nobody else uses). What a person waits for is
read_leads + import. Ratios print last, each with the range of its rounds. Target (issue 24): import >= 0.5x copy.
"""

from __future__ import annotations

import argparse
import functools
import os
import re
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from statistics import median
from typing import Any

from bench.postgres import admin_url, cpu_seconds, fresh_database

ROOT = Path(__file__).resolve().parent.parent
ZONES = ("America/New_York", "", "Europe/Berlin", "Asia/Tokyo", "Mars/Olympus", "Europe/Paris")
COMPANIES = 20_000
OTHER_EVERY = 100  # every 100th address is in another, running campaign
SUPPRESSED_ADDRESSES = 1_000
SUPPRESSED_DOMAINS = 20
PHASES = ("copy", "staging", "import", "again", "rows", "indexed", "keyed")
FLOORS = {"rows": "INCLUDING DEFAULTS", "indexed": "INCLUDING ALL", "keyed": "INCLUDING ALL"}
TABLES = ("sender_leads", "sender_emails", "sender_events")
BASELINE_TABLE = """CREATE TABLE bench_copy (line integer NOT NULL, address text NOT NULL, lead text, timezone text,
                                             fields jsonb)"""
BASELINE_COPY = "COPY bench_copy (line, address, lead, timezone, fields) FROM STDIN"
# The import's writes (sender_add_leads), for the first %(rows)s staged leads, into the tables of one floor.
FLOOR_WRITES = """
WITH leads AS (
    INSERT INTO {sender_leads} (campaign_id, kind, address, lead, timezone, fields, created_at)
    SELECT %(campaign)s, 'file', address, lead, timezone, fields, now()
    FROM (SELECT * FROM sender_leads_import ORDER BY line LIMIT %(rows)s) AS i
    RETURNING id, address
), created AS (
    INSERT INTO {sender_emails} (campaign_id, lead_id, step, address, mailbox_group, subject, body, status,
                                 not_before, created_at, updated_at)
    SELECT %(campaign)s, l.id, 1, i.address, 'sales', s.subject, s.body, 'waiting', now(), now(), now()
    FROM (SELECT * FROM sender_leads_import ORDER BY line LIMIT %(rows)s) AS i
    JOIN leads l ON l.address = i.address
    JOIN sender_campaign_steps s ON s.campaign_id = %(campaign)s AND s.step = 1
    ORDER BY line
    RETURNING id, status
)
INSERT INTO {sender_events} (email_id, at, kind, detail)
SELECT id, clock_timestamp(), status::text, 'added to campaign bench' FROM created
"""


@dataclass
class Timed:
    wall: float = 0.0
    client: float = 0.0  # CPU seconds of this process
    backend: float = 0.0  # CPU seconds of its PostgreSQL backend
    wal: float = 0.0  # MB of WAL the server wrote

    @property
    def cpu(self) -> float:
        return self.client + self.backend


def measure(conn: Any, work: Callable[[], Any]) -> tuple[Timed, Any]:
    """Run `work()` on `conn`'s session: its time, CPU, WAL, and what it returned."""
    pid = conn.info.backend_pid if conn is not None else 0
    lsn = conn.execute("SELECT pg_current_wal_insert_lsn()").fetchone()[0] if conn is not None else None
    began, cpu, backend = time.perf_counter(), time.process_time(), cpu_seconds(pid)
    result = work()
    t = Timed(time.perf_counter() - began, time.process_time() - cpu, cpu_seconds(pid) - backend)
    if conn is not None:
        t.wal = float(conn.execute("SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), %s) / 1e6",
                                   (lsn,)).fetchone()[0])
        conn.commit()
    return t, result


# --- the data ----------------------------------------------------------------------------------------------------

def address(n: int) -> str:
    return f"person{n}@company{n % COMPANIES}.example"


def write_csv(path: Path, count: int) -> None:
    with path.open("w", encoding="utf-8") as out:
        out.write("address,lead,timezone,first_name,company\n")
        for n in range(count):
            first = "" if n % 7 == 0 else f"Name{n}"
            out.write(f"{address(n).capitalize()},crm-{n},{ZONES[n % len(ZONES)]},{first},Company {n % COMPANIES}\n")


def campaign_text(name: str) -> str:
    """campaign.example.yml as campaign `name` of group `sales`."""
    text = (ROOT / "campaign.example.yml").read_text()
    text = re.sub(r"(?m)^name: \S+", f"name: {name}", text)
    return re.sub(r"(?m)^group: \S+", "group: sales", text)


# --- the database ------------------------------------------------------------------------------------------------

def floor_table(level: str, table: str) -> str:
    return f"bench_{level}_{table.removeprefix('sender_')}"


def create_floors(conn: Any) -> None:
    """Copies of the three tables for each floor; `keyed` gets the ledger's foreign keys, pointed at its copies."""
    keys = conn.execute("""SELECT conrelid::regclass::text, pg_get_constraintdef(oid) FROM pg_constraint
                           WHERE contype = 'f' AND conrelid::regclass::text = ANY (%s)""", (list(TABLES),)).fetchall()
    for level, like in FLOORS.items():
        for table in TABLES:
            conn.execute(f"CREATE TABLE {floor_table(level, table)} (LIKE {table} {like})")
    for table, definition in keys:
        pointed = re.sub(r"REFERENCES (sender_\w+)",
                         lambda m: f"REFERENCES {floor_table('keyed', m[1]) if m[1] in TABLES else m[1]}",
                         definition)
        conn.execute(f"ALTER TABLE {floor_table('keyed', table)} ADD {pointed}")


def prepare(ledger: Any, workdir: Path, leads: Sequence[Any]) -> tuple[str, int]:
    """A migrated ledger with suppressions and a running campaign holding some addresses, a draft campaign to
    import into, the baseline's and the floors' tables: (the campaign's name, its id)."""
    from sender.campaigns.spec import load_campaign
    from sender.ledger.campaigns import Campaigns, Move

    ledger.migrate()
    campaigns = Campaigns(ledger)
    for name in ("other", "bench"):
        path = workdir / f"{name}.yml"
        path.write_text(campaign_text(name))
        campaigns.apply(load_campaign(path, {"sales"}), path.read_text())
    campaigns.add_leads("other", leads[OTHER_EVERY // 2::OTHER_EVERY])
    campaigns.move("other", Move.START)
    every = len(leads) // SUPPRESSED_ADDRESSES
    for lead in leads[every // 3::every]:
        ledger.suppress(lead.address, "bench")
    for n in range(SUPPRESSED_DOMAINS):
        ledger.suppress(f"@company{n * 97 % COMPANIES}.example", "bench")
    with ledger.calling("bench") as conn, conn.transaction():
        conn.execute(BASELINE_TABLE)
        create_floors(conn)
        conn.execute("ANALYZE")
        row = conn.execute("SELECT id FROM sender_campaigns WHERE name = 'bench'").fetchone()
    return "bench", int(row[0])


def copy_rows(conn: Any, statement: str, leads: Sequence[Any]) -> None:
    from sender.ledger.campaigns import staged_row

    with conn.cursor().copy(statement) as copy:
        for lead in leads:
            copy.write_row(staged_row(lead))


def copy_baseline(conn: Any, leads: Sequence[Any]) -> None:
    with conn.transaction():
        copy_rows(conn, BASELINE_COPY, leads)


def stage(conn: Any, leads: Sequence[Any]) -> None:
    """The import's staging table, filled as add_leads fills it."""
    from sender.ledger.queries import query

    conn.execute(query("leads_import_table"))
    copy_rows(conn, query("leads_import_copy"), leads)


def write_floor(conn: Any, level: str, leads: Sequence[Any], campaign: int, rows: int) -> None:
    with conn.transaction():
        conn.execute("SET LOCAL statement_timeout = 0")  # the bench's statement, not the ledger's: let it finish
        stage(conn, leads)
        conn.execute(FLOOR_WRITES.format(**{t: floor_table(level, t) for t in TABLES}),
                     {"campaign": campaign, "rows": rows})


def run_round(admin: str, workdir: Path, leads: Sequence[Any]) -> tuple[dict[str, Timed], dict[str, int]]:
    from sender import Ledger
    from sender.ledger.campaigns import Campaigns, LeadOutcome

    def staged_alone() -> None:
        with conn.transaction():
            stage(conn, leads)

    with fresh_database(admin, "import") as url, Ledger.from_url(url) as ledger:
        name, campaign = prepare(ledger, workdir, leads)
        conn = ledger._conn
        campaigns = Campaigns(ledger)
        results: dict[str, Timed] = {}
        results["copy"], _ = measure(conn, lambda: copy_baseline(conn, leads))
        results["staging"], _ = measure(conn, staged_alone)
        results["import"], added = measure(conn, lambda: campaigns.add_leads(name, leads))
        results["again"], again = measure(conn, lambda: campaigns.add_leads(name, leads))
        if again.counts[LeadOutcome.ADDED] or again.counts[LeadOutcome.ALREADY] != added.counts[LeadOutcome.ADDED]:
            raise SystemExit(f"bench: the second import found {again.counts}, not every lead already there")
        for level in FLOORS:
            results[level], _ = measure(conn, functools.partial(write_floor, conn, level, leads, campaign,
                                                                added.counts[LeadOutcome.ADDED]))
    return results, {outcome.value: count for outcome, count in added.counts.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--leads", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--database-url", help="an admin URL of a PostgreSQL that may create databases")
    args = parser.parse_args()

    from sender.campaigns.leads import read_leads
    from sender.campaigns.spec import load_campaign

    admin = admin_url(args.database_url)
    with tempfile.TemporaryDirectory(prefix="sendhost-bench-") as workdir_name:
        workdir = Path(workdir_name)
        csv_path = workdir / "leads.csv"
        write_csv(csv_path, args.leads)
        spec_path = workdir / "spec.yml"
        spec_path.write_text(campaign_text("spec"))
        spec = load_campaign(spec_path, {"sales"})
        reads: list[Timed] = []
        for _ in range(args.rounds):
            t, parsed = measure(None, lambda: read_leads(csv_path, spec))
            reads.append(t)
        leads = parsed.leads
        print(f"{csv_path.stat().st_size / 1e6:.1f} MB CSV, {parsed.report.rows:,} rows, {len(leads):,} leads "
              f"({parsed.report.timezone_defaulted:,} in the campaign's time zone)", flush=True)
        rounds: list[dict[str, Timed]] = []
        for round_no in range(args.rounds):
            results, outcomes = run_round(admin, workdir, leads)
            rounds.append(results)
            print(f"round {round_no + 1}: " + ", ".join(f"{p} {results[p].wall:.2f} s" for p in PHASES)
                  + "; imported: " + ", ".join(f"{k} {v:,}" for k, v in outcomes.items()), flush=True)

    count = len(leads)
    print(f"\nper phase, {count:,} leads (median of {args.rounds} rounds; CPU: this process, its PostgreSQL backend; "
          "WAL: the server's, while the phase ran):")
    print(f"  {'':11s}{'wall s':>8s}{'leads/s':>10s}{'client s':>10s}{'backend s':>11s}{'WAL MB':>8s}")
    for phase in PHASES:
        wall = median(r[phase].wall for r in rounds)
        print(f"  {phase:11s}{wall:8.2f}{count / wall:10,.0f}{median(r[phase].client for r in rounds):10.2f}"
              f"{median(r[phase].backend for r in rounds):11.2f}{median(r[phase].wal for r in rounds):8.1f}")
    read = median(r.wall for r in reads)
    print(f"  {'read_leads':11s}{read:8.2f}{count / read:10,.0f}{median(r.client for r in reads):10.2f}"
          f"  (rounds {min(r.wall for r in reads):.2f}-{max(r.wall for r in reads):.2f} s)")

    def ratio(what: str, phase: str, base: str = "copy", extra: float = 0.0) -> None:
        walls = [(r[base].wall + extra) / (r[phase].wall + extra) for r in rounds]
        cpus = [r[base].cpu / r[phase].cpu for r in rounds]
        print(f"ratio {what}: {median(walls):.2f}x (rounds {min(walls):.2f}-{max(walls):.2f}x; CPU "
              f"{median(cpus):.2f}x)")

    print()
    ratio("staging / copy (the import's own COPY)", "staging")
    for level in FLOORS:
        ratio(f"{level} / copy (floor: the import's rows {level if level != 'rows' else 'alone'})", level)
    ratio("again / copy (every lead already in the campaign)", "again")
    ratio("import / keyed (the classification's share)", "import", "keyed")
    ratio("read_leads + import / read_leads + copy (what a person waits for)", "import", extra=read)
    ratio("import / copy (target >= 0.5x)", "import")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    main()
