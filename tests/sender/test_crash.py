"""SIGKILL of an agent right after each step of the send path: nothing is delivered twice; a row killed before its
attempt started goes back to the queue, a row killed after (the server may have it) ends unconfirmed."""

from __future__ import annotations

import subprocess
import sys
import threading

import pytest

from sender.agent import CHECKPOINTS
from tests.conftest import REPO_ROOT
from tests.sender.world import World

# step -> (final status, deliveries at the server)
EXPECTED = {
    "claimed": ("sent", 1),
    "reserved": ("sent", 1),
    "leased": ("sent", 1),
    "attempt_started": ("unconfirmed", 0),
    "submitted": ("unconfirmed", 1),
    "recorded": ("sent", 1),
}


def test_every_checkpoint_is_covered() -> None:
    assert set(EXPECTED) == set(CHECKPOINTS)


@pytest.mark.slow
@pytest.mark.parametrize("step", CHECKPOINTS)
def test_sigkill_after_a_step(world: World, step: str) -> None:
    world.enqueue(1)
    child = subprocess.run([sys.executable, "-m", "tests.sender.agent_child", str(world.inventory),
                            world.database_url, world.redis_url, step], cwd=REPO_ROOT, capture_output=True,
                           text=True, timeout=120, check=False)
    assert child.returncode == -9, child.stderr
    with world.ledger() as ledger:
        ledger.sweep(0)  # the agent died: what it left in `sending` is settled now, not 30 minutes later
    agent, factory = world.agent()
    agent.run(factory, 1, once=True, stop=threading.Event())
    with world.ledger() as ledger:
        shown = ledger.show("L0", 1)
    assert shown is not None
    status, deliveries = EXPECTED[step]
    assert shown.row["status"] == status, shown.events
    assert len(world.server.recorder.received) == deliveries
    if deliveries:
        assert world.server.recorder.received[0].message_id == shown.row["message_id"]
