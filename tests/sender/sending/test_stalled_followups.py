"""Follow-ups stalled behind their mailbox (sender.ledger.stalled), as the agent leaves them: a real agent, ledger,
Redis and submission server; the provider stops taking one mailbox's login between a lead's steps."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from sender import Ledger
from sender.assembly import stalled_followups
from sender.ledger.stalled import DISCONNECTED, PAUSED
from sender.sending.agent import Agent
from tests.sender.world import make_world
from tests.support.submission import SubmissionServer
from warmup import Guard

BOX0, BOX1 = "box0@sender.example", "box1@sender.example"


def _run_once(built: tuple[Agent, Callable[[], Ledger]]) -> None:
    """`sender run --once`: what is due now, then the agent stops."""
    agent, factory = built
    agent.run(factory, 1, once=True, stop=threading.Event())


def test_a_follow_up_whose_mailbox_lost_its_login_is_named_with_since_when_and_why(
        tmp_path: Path, database_url: str, redis_url: str, submission: SubmissionServer) -> None:
    world = make_world(tmp_path, database_url, redis_url, submission, mailboxes=2)
    world.enqueue(4)
    _run_once(world.agent())
    assert len(submission.recorder.received) == 4
    submission.recorder.users[BOX0] = "changed at the provider"  # its login is refused from now on
    world.enqueue(4, step=2)  # each due now, from the mailbox that sent the lead's step 1
    _run_once(world.agent(smtp_timeout_s=2.0))
    with Ledger.from_url(database_url) as ledger, Guard.from_url(redis_url) as guard:
        (stalled,) = stalled_followups(ledger, guard)
        rows = {n: ledger.show(f"L{n}", 2) for n in range(4)}
    waiting = {n: s.row for n, s in rows.items() if s is not None and s.row["status"] != "sent"}
    # the ones from box1 went; those pinned to box0 wait for it (given back, their attempt refunded)
    assert waiting and all(row["mailbox"] in (None, BOX0) and row["attempts"] == 0 for row in waiting.values())
    assert len(submission.recorder.received) == 8 - len(waiting)
    assert (stalled.campaign, stalled.mailbox, stalled.rows, stalled.state, stalled.reason) == (
        "enqueue", BOX0, len(waiting), DISCONNECTED, "disconnected: authentication failed")
    assert stalled.due_since == min(row["created_at"] for row in waiting.values())  # due when queued
    assert f"sendhost warmup resume {BOX0}" in stalled.advice()
    assert f"sendhost campaign reassign enqueue --from {BOX0}" in stalled.advice()


def test_only_a_paused_mailbox_stalls_its_follow_ups(tmp_path: Path, database_url: str, redis_url: str,
                                                     submission: SubmissionServer) -> None:
    """A mailbox at its cap or in its gap frees by itself: its follow-ups are not stalled. One paused by a person
    is, with the person's reason."""
    world = make_world(tmp_path, database_url, redis_url, submission, mailboxes=2, min_gap_s=3600)
    world.enqueue(2)
    _run_once(world.agent())
    world.enqueue(2, step=2)
    with Ledger.from_url(database_url) as ledger, Guard.from_url(redis_url) as guard:
        assert {s.state for s in guard.status([BOX0, BOX1])} == {"cooldown"}
        assert stalled_followups(ledger, guard) == []
        guard.pause(BOX1, "paused by hand: checking its DMARC reports")
        (stalled,) = stalled_followups(ledger, guard)
    assert (stalled.mailbox, stalled.rows, stalled.state, stalled.reason) == (
        BOX1, 1, PAUSED, "paused by hand: checking its DMARC reports")
