"""PostgreSQL restarted under a running agent (a server this test started): the agent reconnects and goes on,
and nothing is delivered twice."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from sender import Ledger
from tests.sender.world import make_world
from tests.support.postgres_server import PrivatePostgres, fresh_database, private_postgres
from tests.support.submission import SubmissionServer

ROWS = 40


@pytest.fixture
def own_postgres() -> Iterator[PrivatePostgres]:
    with private_postgres() as server:
        yield server


@pytest.mark.slow
def test_agent_rides_out_a_database_restart(tmp_path: Path, own_postgres: PrivatePostgres, redis_url: str,
                                            submission: SubmissionServer) -> None:
    with fresh_database(own_postgres.admin_url) as database_url:
        world = make_world(tmp_path, database_url, redis_url, submission, mailboxes=4)
        world.enqueue(ROWS)
        submission.recorder.delay_s = 0.05  # a slow server, so the restart lands mid-run
        agent, factory = world.agent()
        runner = threading.Thread(target=agent.run, args=(factory, 2), kwargs={"once": True,
                                                                               "stop": threading.Event()})
        runner.start()
        deadline = time.monotonic() + 60
        while len(submission.recorder.received) < 8 and time.monotonic() < deadline:
            time.sleep(0.01)
        own_postgres.stop("fast")
        time.sleep(1.5)
        own_postgres.start()
        runner.join(timeout=180)
        assert not runner.is_alive()
        received = submission.recorder.received
        assert max(Counter(r.message_id for r in received).values()) == 1
        with Ledger.from_url(database_url) as ledger:
            ledger.sweep(0)  # a call cut off by the restart may have left a row `sending`
            rows = [ledger.show(f"L{n}", 1) for n in range(ROWS)]
            counts = ledger.counts()
        status_of = {r.row["message_id"]: r.row["status"] for r in rows if r is not None and r.row["message_id"]}
        delivered = {r.message_id for r in received}
        assert {mid for mid, status in status_of.items() if status == "sent"} == delivered - {
            mid for mid, status in status_of.items() if status == "unconfirmed"}
        # at most the rows whose calls the restart cut off are left unsettled, and none of them was resent
        assert counts["sent"] >= ROWS - 2, counts
