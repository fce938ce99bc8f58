"""What the ledger's counters (version 10) cost a claim: the same claims with their triggers on and off, interleaved
in one ledger and one connection, so that the machine's other load falls on both alike.

    python -m bench.counters [--batches B] [--claims N] [--database-url URL]

One ledger of B x N queued rows (sender_enqueue); B batches of N claims of one row (Ledger.claim, as the agent
claims), the even batches with the counters' triggers on (as schema.sql makes them), the odd ones off (bench/claim.py's
COUNTER_TRIGGERS). Per batch, the backend's CPU per claim (from /proc: only when the server runs here) and the wall
time per claim; prints the medians and the ratio on / off of each pair of batches, with their range.
"""

from __future__ import annotations

import argparse
import os
import time
from statistics import median

from bench.claim import COUNTER_TRIGGERS
from bench.postgres import admin_url, cpu_seconds, fresh_database

ENQUEUE = """SELECT sender_enqueue('L' || n, 1, 'lead' || n || '@rcpt.example', 'bench', 'Hello', 'Hi there', NULL,
                                  NULL)
             FROM generate_series(1, %(rows)s) AS n"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batches", type=int, default=24, help="an even number: pairs of on and off")
    parser.add_argument("--claims", type=int, default=1000, help="per batch")
    parser.add_argument("--database-url", help="an admin URL of a PostgreSQL that may create databases")
    args = parser.parse_args()
    if args.batches < 2 or args.batches % 2:
        raise SystemExit(f"bench: --batches {args.batches}: give an even number, 2 or more")

    from sender import Ledger

    turned_on = tuple(statement.replace("DISABLE", "ENABLE") for statement in COUNTER_TRIGGERS)
    per_claim: dict[str, list[tuple[float, float]]] = {"on": [], "off": []}
    with fresh_database(admin_url(args.database_url), "counters") as url, Ledger.from_url(url) as ledger:
        ledger.migrate()
        conn = ledger._conn
        conn.execute(ENQUEUE, {"rows": args.batches * args.claims})
        conn.execute("VACUUM ANALYZE")
        pid = conn.info.backend_pid
        for batch in range(args.batches):
            mode = "on" if batch % 2 == 0 else "off"
            for statement in turned_on if mode == "on" else COUNTER_TRIGGERS:
                conn.execute(statement)
            cpu, began = cpu_seconds(pid), time.perf_counter()
            for _ in range(args.claims):
                if not ledger.claim("bench", 1, ["bench"]):
                    raise SystemExit("bench: a claim found the queue empty")
            per_claim[mode].append(((cpu_seconds(pid) - cpu) / args.claims * 1e6,
                                    (time.perf_counter() - began) / args.claims * 1e6))

    print(f"{args.batches // 2} pairs of {args.claims} claims, medians per claim:")
    for mode, seen in per_claim.items():
        print(f"  counters {mode:3s}  backend CPU {median(c for c, _ in seen):6.0f} µs   wall "
              f"{median(w for _, w in seen):6.0f} µs")
    for index, what in ((0, "backend CPU"), (1, "wall")):
        ratios = [on[index] / off[index] for on, off in zip(per_claim["on"], per_claim["off"], strict=True)
                  if off[index] > 0]
        if ratios:
            print(f"ratio on / off, {what}: {median(ratios):.2f}x (pairs {min(ratios):.2f}-{max(ratios):.2f}x)")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    main()
