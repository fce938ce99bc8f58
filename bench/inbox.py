"""The inbox reader's cost per message: hostile messages against a normal bounce, through a real pass.

    python -m bench.inbox [--messages 20] [--rounds 3] [--database-url URL]

Anyone can mail a sending mailbox, so no message may cost the reader more than a small fixed time (issue 26: one
DSN quoting 40,000 Message-IDs took 13-25 s to parse, one 1.3 MB DSN made a pass take 21.7 s instead of 0.7 s).
This fills one mailbox per kind and round on a real dovecot (tests/support/dovecot.py: Debian's dovecot-imapd, TLS
on loopback) with `--messages` messages of that kind, each about a row of a real ledger (PostgreSQL at
--database-url, else 127.0.0.1:5432, else the embedded one), and times `InboxReader.read` over it: connect, fetch,
parse, look up, apply, mark. Kinds, in interleaved rounds:

  normal     a Postfix DSN (5.1.1) about one of our rows: read, applied as a bounce (the baseline)
  40k-ids    a DSN quoting 40,000 Message-IDs, ours the last (1.7 MB)
  1.3MB      a 1.3 MB DSN whose human part is junk lines
  parts      a reply of 5,000 MIME parts
  charset    a DSN declaring charset=x-no-such-charset (once: every pass failed on it)

Prints per kind the time per message of the pass (median over rounds, and the range) and its ratio to normal;
then the parser alone (`bounces.parse`, no I/O) per kind, the bound that the caps set. Target: every hostile kind's
pass within 10x of a normal bounce's, whatever its size.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import time
import uuid
from collections import defaultdict
from collections.abc import Callable
from datetime import date
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.send import database
from sender.feedback.bounces import parse
from sender.feedback.inbox import InboxReader
from sender.ledger.events import Feedback
from sendhost.model import Credential, ImapSettings, Mailbox
from tests.sender import inbox_samples as samples
from tests.support.dovecot import Dovecot, dovecot_server

KINDS: dict[str, Callable[[str, str], bytes]] = {
    "normal": samples.postfix_hard,
    "40k-ids": samples.many_ids_dsn,
    "1.3MB": samples.huge_dsn,
    "parts": samples.many_parts,
    "charset": samples.charset_dsn("x-no-such-charset"),
}


def _address(kind: str, round_no: int) -> str:
    return f"bench-{kind.lower().replace('.', '')}-{round_no}@sender.example"


def _mailbox(server: Dovecot, address: str) -> Mailbox:
    imap = ImapSettings(host=server.host, port=server.imaps_port, security="tls", username=address,
                        credential=Credential(address, "imap", password_env="BENCH_IMAP_PASSWORD"),
                        ca_file=str(server.ca_file))
    return Mailbox(address=address, domain="sender.example", start=date(2026, 1, 1), imap=imap)


def _sent_row(feedback: Feedback, lead: str, to: str, mailbox: str) -> str:
    """A row the agent sent from `mailbox`: its Message-ID."""
    feedback.ledger.enqueue(lead=lead, step=1, address=to, group="bench", subject="Hi", text="Hello")
    (row,) = [r for r in feedback.ledger.claim("bench", 100) if r.lead == lead]
    _outcome, message_id = feedback.ledger.begin_attempt(row.id, uuid.uuid4(), mailbox, None,
                                                         f"<{uuid.uuid4()}@sender.example>")
    feedback.ledger.record_sent(row.id, "250 ok")
    assert message_id is not None
    return message_id


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=20, help="messages of each kind per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--database-url", help="an admin URL of a PostgreSQL that may create a database")
    args = parser.parse_args()
    logging.disable(logging.WARNING)  # each hostile message is logged as left alone: thousands of lines

    password = "bench-imap-pw"
    users = {_address(kind, r): password for kind in KINDS for r in range(args.rounds)}
    admin_url, database_url = database(args.database_url)
    per_message: dict[str, list[float]] = defaultdict(list)
    with dovecot_server(users) as server, Feedback.from_url(database_url) as feedback:
        feedback.ledger.migrate()
        print(f"filling {len(users)} mailboxes with {args.messages} messages each...", flush=True)
        for kind, sample in KINDS.items():
            for round_no in range(args.rounds):
                address = _address(kind, round_no)
                for n in range(args.messages):
                    to = f"{kind}-{round_no}-{n}@rcpt.example".lower().replace(".3mb", "3mb")
                    message_id = _sent_row(feedback, f"{address}-{n}", to, address)
                    server.append(address, sample(message_id, to))
        reader = InboxReader(feedback, env={"BENCH_IMAP_PASSWORD": password})
        for round_no in range(args.rounds):
            for kind in KINDS:
                mailbox = _mailbox(server, _address(kind, round_no))
                started = time.perf_counter()
                report = reader.read(mailbox)
                elapsed = time.perf_counter() - started
                assert report.error is None, report.error
                assert sum(report.outcomes[o] for o in ("applied", "unmatched", "malformed")) == args.messages, \
                    report.outcomes
                per_message[kind].append(elapsed / args.messages)
            print(f"round {round_no + 1}: " + ", ".join(f"{k} {per_message[k][-1] * 1000:.1f} ms/msg" for k in KINDS),
                  flush=True)
    if admin_url != database_url:
        import psycopg

        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{database_url.rsplit("/", 1)[1]}" WITH (FORCE)')

    baseline = statistics.median(per_message["normal"])
    print(f"\nper message, a pass over {args.messages} messages of each kind ({args.rounds} rounds, median and range):")
    for kind in KINDS:
        times = per_message[kind]
        print(f"  {kind:8s} {statistics.median(times) * 1000:7.2f} ms  ({min(times) * 1000:.2f}-"
              f"{max(times) * 1000:.2f})  ratio to normal {statistics.median(times) / baseline:5.2f}x")
    worst = max(statistics.median(per_message[k]) / baseline for k in KINDS)
    print(f"worst hostile kind: {worst:.2f}x a normal bounce's pass (target <= 10x)")
    print("\nthe parser alone (bounces.parse, no I/O; median of 20), the bound the caps set:")
    parsed: dict[str, float] = {}
    for kind, sample in KINDS.items():
        raw = sample("<bench@sender.example>", "lead@rcpt.example")
        times = []
        for _ in range(20):
            started = time.perf_counter()
            parse(raw)
            times.append(time.perf_counter() - started)
        parsed[kind] = statistics.median(times)
        print(f"  {kind:8s} {len(raw):>9,} bytes {parsed[kind] * 1000:7.2f} ms  ratio to normal "
              f"{parsed[kind] / parsed['normal']:6.1f}x")


if __name__ == "__main__":
    main()
