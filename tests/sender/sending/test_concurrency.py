"""Several agents on one ledger, in real processes (the `sendhost sender run` CLI), each with several workers."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT
from tests.sender.world import PRIMARY, World, clear_of_midnight, make_world
from tests.support.submission import SubmissionServer
from warmup import Guard

ROWS = 100


def _agents(world: World, count: int, workers: int) -> list[subprocess.CompletedProcess[str]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SENDHOST_") and k != "REDIS_URL"}
    env["PYTHONPATH"] = str(REPO_ROOT)
    args = [sys.executable, "-m", "toolkit", *world.cli_args("run", "--host", "sender-1", "--workers", str(workers),
                                                             "--once", "--smtp-timeout", "10")]
    procs = [subprocess.Popen(args, cwd=world.tmp, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(count)]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        results.append(subprocess.CompletedProcess(args, proc.returncode, out, err))
    return results


@pytest.mark.slow
def test_four_agents_four_workers_send_each_row_exactly_once(world: World) -> None:
    world.enqueue(ROWS)
    for result in _agents(world, 4, 4):
        assert result.returncode == 0, result.stderr
    received = world.server.recorder.received
    message_ids = Counter(r.message_id for r in received)
    assert len(message_ids) == ROWS and max(message_ids.values()) == 1
    assert sorted(r.rcpt for r in received) == sorted(f"lead{n}@rcpt.example" for n in range(ROWS))
    with world.ledger() as ledger:
        assert ledger.counts()["sent"] == ROWS
    # the rotation budget of each slot address held; what no slot could carry left from the primary address
    budgets = world.budgets()
    for peer, count in world.server.recorder.peers().items():
        assert peer == PRIMARY or count <= budgets[peer], (peer, count, budgets[peer])
    # and no mailbox went over its day's cap
    per_mailbox = Counter(r.mail_from for r in received)
    with Guard.from_url(world.redis_url) as guard:
        for status in guard.status(world.mailboxes):
            assert per_mailbox[status.address] == status.reserved <= status.cap


def test_a_week_one_mailbox_sends_at_most_ten_a_day(tmp_path: Path, database_url: str, redis_url: str,
                                                    submission: SubmissionServer) -> None:
    clear_of_midnight()
    world = make_world(tmp_path, database_url, redis_url, submission, mailboxes=1, start=datetime.now(UTC).date())
    world.enqueue(14)
    for result in _agents(world, 2, 2):
        assert result.returncode == 0, result.stderr
    assert len(submission.recorder.received) == 10
    with world.ledger() as ledger:
        counts = ledger.counts()
        assert (counts["sent"], counts["queued"]) == (10, 4)
        assert ledger.next_due_s() is not None and ledger.next_due_s() > 60  # tomorrow, in the mailbox's zone


def test_redis_flushed_mid_run_counters_come_back_from_the_ledger(tmp_path: Path, database_url: str,
                                                                  redis_url: str, submission: SubmissionServer) -> None:
    import redis

    clear_of_midnight()
    world = make_world(tmp_path, database_url, redis_url, submission, mailboxes=1, start=datetime.now(UTC).date())
    agent, factory = world.agent()
    world.enqueue(6, prefix="A")
    agent.run(factory, 1, once=True, stop=threading.Event())
    assert len(submission.recorder.received) == 6
    client = redis.Redis.from_url(redis_url)
    client.flushall()
    client.close()
    # The same agent goes on (no restart, so no start-up rebuild): it finds its mailbox gone from Redis and
    # rebuilds the counters from the ledger before reserving anything.
    world.enqueue(10, prefix="B", address=lambda n: f"b{n}@rcpt.example")
    agent.work(factory, 0, once=True, stop=threading.Event())
    assert len(submission.recorder.received) == 10
    with Guard.from_url(redis_url) as guard:
        (status,) = guard.status(world.mailboxes)
    assert (status.reserved, status.cap) == (10, 10)
