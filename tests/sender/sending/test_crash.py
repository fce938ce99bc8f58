"""SIGKILL of an agent right after each step of the send path: nothing is delivered twice; a row killed before its
attempt started goes back to the queue, a row killed after (the server may have it) ends unconfirmed."""

from __future__ import annotations

import subprocess
import sys
import threading

import pytest

from sender.sending.agent import CHECKPOINTS
from tests.conftest import REPO_ROOT
from tests.sender.world import World
from warmup import Guard

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


def test_an_exception_after_the_attempt_started_undoes_nothing(world: World) -> None:
    """Not a SIGKILL but an ordinary exception (a bug, a failed write) after the handoff: the send path gives back
    only what was taken before the attempt started. The mailbox's reservation stays counted (the provider has the
    message) and the row is never sent again."""
    world.enqueue(1)

    def checkpoint(name: str) -> None:
        if name == "submitted":
            raise RuntimeError("a bug right after the handoff")

    agent, factory = world.agent(checkpoint)
    with factory() as ledger:
        agent.prepare(ledger)
        with pytest.raises(RuntimeError, match="right after the handoff"):
            agent.send_one(ledger, "w")
        # Read before anything rebuilds the counters from the ledger (an agent's start does), which would hide it.
        with Guard.from_url(world.redis_url) as guard:
            assert sum(status.reserved for status in guard.status(world.mailboxes)) == 1
        assert ledger.sweep(0) == (0, 1)  # still `sending` with its attempt: settled as unconfirmed
    again, factory = world.agent()
    again.run(factory, 1, once=True, stop=threading.Event())
    assert len(world.server.recorder.received) == 1
    with world.ledger() as ledger:
        shown = ledger.show("L0", 1)
    assert shown is not None and shown.row["status"] == "unconfirmed"
