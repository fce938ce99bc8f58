"""Benchmark a /metrics/ scrape of `sendhost sender web` at 1,000 and 1,000,000 ledger rows, same run.

Two numbers at each size: a scrape as Prometheus sees it (the registry rendered, the ledger's numbers from the
snapshot CachedCollector keeps, at most CACHE_S old) and one snapshot refresh (LedgerCollector.collect, the
ledger queries themselves, run at most once per CACHE_S however many scrape). Prints each median and the ratio
1,000,000 / 1,000 (target for the scrape: within 2x). Rows are sent rows with one `sent` event each, bulk-inserted.
Run: .venv/bin/python bench/metrics.py [--small 1000] [--large 1000000]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from prometheus_client import generate_latest

from sender import Ledger
from sender.feedback.metrics import LedgerCollector
from sender.feedback.web import ledger_metrics, open_pool
from tests.support.postgres_server import fresh_database, postgres_admin_url


def _fill(url: str, rows: int) -> None:
    with Ledger.from_url(url) as ledger:
        ledger.migrate()
        queued = ledger.enqueue(lead="B", step=1, address="lead@x.example", group="bench", subject="Hi", text="x")
        assert queued == "queued"
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("""
            INSERT INTO sender_emails (lead_id, step, address, mailbox_group, subject, body, status, campaign_id,
                                       message_id, mailbox)
            SELECT e.lead_id, s, 'lead' || s || '@x.example', e.mailbox_group, e.subject, e.body, 'sent', e.campaign_id,
                   '<' || s || '@bench.example>', 'box' || (s %% 20) || '@sender.example'
            FROM sender_emails e, generate_series(2, %(rows)s) AS s WHERE e.id = (SELECT min(id) FROM sender_emails)
        """, {"rows": rows})
        conn.execute("INSERT INTO sender_events (email_id, kind) SELECT id, 'sent' FROM sender_emails")
        conn.execute("ANALYZE")


def _median_s(run: Callable[[], object], times: int) -> float:
    seconds = []
    for _ in range(times):
        started = time.perf_counter()
        run()
        seconds.append(time.perf_counter() - started)
    return statistics.median(seconds)


def measure(admin_url: str, rows: int) -> tuple[float, float]:
    """(median seconds of a scrape, of a snapshot refresh) at `rows` rows."""
    with fresh_database(admin_url) as url:
        _fill(url, rows)
        with open_pool(url, size=2) as pool:
            metrics = ledger_metrics(pool)
            generate_latest(metrics.registry)  # the first scrape fills the snapshot
            scrape = _median_s(lambda: generate_latest(metrics.registry), 200)
            refresh = _median_s(lambda: list(LedgerCollector(pool).collect()), 5)
    return scrape, refresh


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--small", type=int, default=1_000)
    parser.add_argument("--large", type=int, default=1_000_000)
    args = parser.parse_args()
    with postgres_admin_url() as admin_url:
        small = measure(admin_url, args.small)
        large = measure(admin_url, args.large)
    for name, a, b in (("scrape", small[0], large[0]), ("snapshot refresh", small[1], large[1])):
        print(f"{name:>16}: {args.small:>9,} rows {a * 1000:9.3f} ms   {args.large:>9,} rows {b * 1000:9.3f} ms   "
              f"ratio {b / a:6.2f}x")
    print(f"scrape target within 2x: {'met' if large[0] / small[0] <= 2 else 'NOT met'}")


if __name__ == "__main__":
    main()
