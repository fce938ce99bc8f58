"""A sending world for agent tests: an inventory with one host (slots 127.0.0.2-9, primary 127.0.0.1), mailboxes
that submit to a real aiosmtpd server (STARTTLS, AUTH), the pool registered in a real Redis, a real ledger."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import redis

from ippool import Pool
from sender import Ledger
from sender.sending.agent import Agent
from tests.sender.clocked import HOST, clocked_agent
from tests.support.submission import SubmissionServer
from toolkit.app import App
from toolkit.cli.sender.context import SenderContext
from toolkit.cli.sender.run import build_agent

PRIMARY = "127.0.0.1"
SLOTS = [f"127.0.0.{n}" for n in range(2, 10)]
BUDGET = (8, 15)
UNSUBSCRIBE_BASE = "https://u.example.test"


@dataclass
class World:
    tmp: Path
    inventory: Path
    database_url: str
    redis_url: str
    server: SubmissionServer
    mailboxes: list[str]

    def ledger(self) -> Ledger:
        return Ledger.from_url(self.database_url)

    def enqueue(self, count: int, *, prefix: str = "L", group: str = "sales", step: int = 1,
                address: Callable[[int], str] | None = None) -> None:
        with self.ledger() as ledger:
            for n in range(count):
                to = address(n) if address else f"lead{n}@rcpt.example"
                ledger.enqueue(lead=f"{prefix}{n}", step=step, address=to, group=group, subject=f"Hello {n}",
                               text=f"Hi lead {n}")

    def context(self) -> SenderContext:
        app = App(inventory_flag=str(self.inventory), redis_url_flag=self.redis_url, env={})
        return SenderContext(app, self.database_url)

    def agent(self, checkpoint: Callable[[str], None] | None = None,
              smtp_timeout_s: float = 5.0) -> tuple[Agent, Callable[[], Ledger]]:
        return build_agent(self.context(), HOST, checkpoint, smtp_timeout_s=smtp_timeout_s)

    def clocked_agent(self, clock: Callable[[], float], checkpoint: Callable[[str], None] | None = None,
                      smtp_timeout_s: float = 5.0) -> tuple[Agent, Callable[[], Ledger]]:
        """The agent of `agent()`, its guard, pool and ledger connections all on `clock`."""
        return clocked_agent(self.context(), clock, checkpoint, smtp_timeout_s=smtp_timeout_s)

    def cli_args(self, *args: str) -> list[str]:
        return ["--inventory", str(self.inventory), "--redis-url", self.redis_url, "sender", "--database-url",
                self.database_url, *args]

    def budgets(self) -> dict[str, int]:
        client = redis.Redis.from_url(self.redis_url, decode_responses=True)
        try:
            (status,) = Pool(client).status(HOST)
            return {s.private_ip: s.budget for s in status.slots if s.private_ip}
        finally:
            client.close()


def make_world(tmp: Path, database_url: str, redis_url: str, server: SubmissionServer, *, mailboxes: int = 4,
               start: date | None = None, extra_yaml: str = "", passwords: dict[str, str] | None = None,
               min_gap_s: float = 0, imap: str | None = None) -> World:
    """`imap`: the body of each mailbox's imap settings (`host: ..., port: ..., security: tls, ca_file: ...`); its
    login is the mailbox's address and smtp password."""
    start = start or (datetime.now(UTC).date() - timedelta(days=90))
    addresses = [f"box{n}@sender.example" for n in range(mailboxes)]
    entries = []
    for address in addresses:
        secret = tmp / f"{address}.pw"
        secret.write_text((passwords or {}).get(address, f"pw-{address}") + "\n")
        secret.chmod(0o600)
        server.recorder.users[address] = f"pw-{address}"
        entries.append(
            f"      - address: {address}\n        domain: sender.example\n        start: '{start.isoformat()}'\n"
            f"        group: sales\n        min_gap_s: {min_gap_s}\n        jitter_s: [0, 0]\n"
            f"        smtp: {{host: {server.host}, port: {server.port}, security: starttls, username: {address}, "
            f"password_file: '{secret}', ca_file: '{server.ca_file}'}}\n"
            + (f"        imap: {{{imap}}}\n" if imap else ""))
    inventory = tmp / "inventory.yml"
    inventory.write_text(
        "all:\n  vars:\n"
        f"    sendhost_unsubscribe_base_url: {UNSUBSCRIBE_BASE}\n{extra_yaml}"
        "    sendhost_mailboxes:\n" + "".join(entries) +
        "  children:\n    senders:\n      hosts:\n"
        f"        {HOST}:\n          sendhost_instance_id: i-0123456789abcdef0\n"
        f"          sendhost_region: us-east-1\n          sendhost_primary_ip: {PRIMARY}\n"
        f"          sendhost_pool: {{slots: {len(SLOTS)}, budget: [{BUDGET[0]}, {BUDGET[1]}], "
        f"private_ips: [{', '.join(SLOTS)}]}}\n")
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    pool = Pool(client)
    pool.register_host(HOST, PRIMARY, BUDGET)
    for slot, address in enumerate(SLOTS):
        pool.put_address(HOST, slot, private_ip=address)
    client.close()
    with Ledger.from_url(database_url) as ledger:
        ledger.migrate()
    return World(tmp, inventory, database_url, redis_url, server, addresses)


def clear_of_midnight(margin_s: float = 180.0) -> None:
    """Wait out the last minutes of a UTC day: a test counting one day's sends must not straddle two days."""
    import time

    now = datetime.now(UTC)
    left = (datetime.combine(now.date() + timedelta(days=1), datetime.min.time(), UTC) - now).total_seconds()
    if left < margin_s:
        time.sleep(left + 1)
