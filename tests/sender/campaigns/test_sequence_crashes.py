"""A three-step campaign sent by agents that keep dying (issue 24, "Must hold"): rounds of four agent processes with
four workers each, every process SIGKILLed at a named step of the send path (the steps taken in turn, one per
process, four a round), until each lead's sequence has ended. Between rounds, as a person
would: the sweep settles what the dead left `sending`, and each `unconfirmed` row is resolved by what the
submission server received (sent: the sequence goes on; not sent: it ends failed, never resent). Then more leads
are added while some step has not yet seen a death (so that each round has work to die in), or the clock moves to
the next due step.

What must hold at the server: each (lead, step) at most once, exactly once for every row the ledger has as sent,
never for one it has not; each lead's steps in order from one mailbox, threaded; a lead completed exactly when all
three steps arrived.
"""

from __future__ import annotations

import itertools
import json
import os
import select
import subprocess
import sys
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest

from sender import Ledger
from sender.sending.agent import CHECKPOINTS
from tests.conftest import REPO_ROOT
from tests.sender.sequences import (
    add_leads,
    arrivals,
    check_thread,
    ended,
    set_up_campaign,
    subject_of,
)
from tests.sender.world import World, make_world
from tests.support.clock import ShiftedClock
from tests.support.submission import SubmissionServer

BATCH = 24  # leads added at a time: more due rows than the four agents' sixteen workers take at once
MAX_BATCHES = 3
PROCESSES, WORKERS = 4, 4
MAX_ROUNDS = 16  # a few more than the rounds it takes: more means the campaign stopped draining
ROUND_TIMEOUT_S = 120


def _leads(batch: int) -> list[tuple[str, str, str]]:
    return [(f"lead{batch}-{n}@rcpt.example", f"Lead{batch}{n}", "Acme") for n in range(BATCH)]


class Agents:
    """The agent processes of the rounds, forked by one long-lived process (tests/sender/sequence_agent_child.py)
    that imported the sender once."""

    def __init__(self, world: World) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SENDHOST_") and k != "REDIS_URL"}
        env["PYTHONPATH"] = str(REPO_ROOT)
        self._process = subprocess.Popen(
            [sys.executable, "-m", "tests.sender.sequence_agent_child", str(world.inventory), world.database_url,
             world.redis_url, str(WORKERS)],
            cwd=world.tmp, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def round(self, clock: ShiftedClock, kills: list[tuple[str, int]]) -> list[int]:
        """An agent process per (step, sends) of `kills`, dying at step once it recorded `sends`; their exits."""
        assert self._process.stdin is not None and self._process.stdout is not None
        self._process.stdin.write(json.dumps({"offset_s": clock.offset_s, "kills": kills}) + "\n")
        self._process.stdin.flush()
        ready = select.select([self._process.stdout], [], [], ROUND_TIMEOUT_S)[0]
        assert ready, f"a round of agents ran longer than {ROUND_TIMEOUT_S}s"
        line = self._process.stdout.readline()
        assert line, f"the agents' parent exited {self._process.wait()}"
        codes: list[int] = json.loads(line)
        assert set(codes) <= {0, -9}, codes  # an agent ended otherwise: its error is on stderr
        return codes

    def __enter__(self) -> Agents:
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._process.stdin is not None
        self._process.stdin.close()  # its parent ends once the round under way (if any) has
        self._process.wait(timeout=ROUND_TIMEOUT_S)


def _settle_the_dead(world: World, ledger: Ledger) -> None:
    """What a person does after a crash: sweep, then give every unconfirmed row the server's verdict."""
    world.server.recorder.wait_until_idle()  # no killed client's session can still hand anything over
    ledger.sweep(0)
    delivered = {r.message_id for r in world.server.recorder.snapshot()}
    for row in ledger.unconfirmed():
        verdict = row.message_id in delivered
        assert ledger.resolve(row.id, sent=verdict, note="checked the server's log") == "resolved"


def _due_rows(database_url: str, clock: ShiftedClock) -> int:
    with psycopg.connect(database_url) as conn:
        (count,) = conn.execute("SELECT count(*) FROM sender_emails WHERE status IN ('queued', 'retry') "
                                "AND not_before <= %s", (datetime.fromtimestamp(clock(), UTC),)).fetchone() or (0,)
    return int(count)


def _drained(database_url: str) -> bool:
    return all(reason is not None for reason in ended(database_url, "q1").values())


@pytest.mark.slow
def test_agents_killed_at_every_step_still_send_each_step_once_and_in_order(
        tmp_path: Path, database_url: str, redis_url: str, submission: SubmissionServer) -> None:
    clock = ShiftedClock()
    world = make_world(tmp_path, database_url, redis_url, submission,
                       start=datetime.fromtimestamp(clock(), UTC).date() - timedelta(days=90))
    killed_at: Counter[str] = Counter()
    leads = _leads(0)
    with Agents(world) as agents, Ledger.from_url(database_url, clock=clock) as ledger:
        spec, _ = set_up_campaign(tmp_path, ledger, "q1", leads)
        for rounds in itertools.count(1):
            assert rounds <= MAX_ROUNDS, f"not drained after {MAX_ROUNDS} rounds: {ended(database_url, 'q1')}"
            # the steps in turn, four a round: round 1 kills at the first four, round 2 at the last two and the
            # first two again, and so on
            steps = [CHECKPOINTS[(PROCESSES * (rounds - 1) + i) % len(CHECKPOINTS)] for i in range(PROCESSES)]
            # each dies once it sent a share of what is due: every death comes amid the other workers' sends
            sends = max(1, _due_rows(database_url, clock) // (3 * PROCESSES))
            codes = agents.round(clock, [(step, sends) for step in steps])
            killed_at.update(step for step, code in zip(steps, codes, strict=True) if code == -9)
            _settle_the_dead(world, ledger)
            covered = all(killed_at[c] for c in CHECKPOINTS)
            if covered and _drained(database_url):
                break
            if not covered and len(leads) < BATCH * MAX_BATCHES:
                batch = _leads(len(leads) // BATCH)
                add_leads(tmp_path, ledger, spec, batch)
                leads += batch
                continue
            due = ledger.next_due_s(["sales"])
            if due is not None and due > 0:
                clock.advance(due + 1)

    assert all(killed_at[c] for c in CHECKPOINTS), killed_at
    received = world.server.recorder.snapshot()
    assert max(Counter(r.message_id for r in received).values()) == 1  # no row's message twice
    got = arrivals(received, database_url)  # every message is a campaign row's
    for address, first_name, _company in leads:
        if address in got:  # a lead whose step 1 died before its handoff got nothing, and ended failed
            check_thread(address, got[address], subject_of(first_name))
    with psycopg.connect(database_url) as conn:
        rows = conn.execute("SELECT message_id, address, step, status::text FROM sender_emails e "
                            "JOIN sender_campaigns c ON c.id = e.campaign_id WHERE c.name = 'q1'").fetchall()
    delivered = {r.message_id for r in received}
    for message_id, lead, step, status in rows:
        assert status in ("sent", "failed"), (lead, step, status)  # nothing left sending or unconfirmed
        assert (status == "sent") == (message_id in delivered), (lead, step, status)
    reasons = ended(database_url, "q1")
    for address, _first_name, _company in leads:
        arrived = len(got.get(address, []))
        assert reasons[address] == ("completed" if arrived == 3 else "failed"), (address, arrived)
    assert any(len(got.get(a, [])) == 3 for a, _, _ in leads)  # some sequences went through every crash
