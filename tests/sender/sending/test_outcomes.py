"""Real provider replies, served by the submission server, drive each outcome of the send path."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import redis

from sender import Ledger
from tests.sender.world import World, clear_of_midnight, make_world
from tests.support.submission import Scripted, SubmissionServer
from warmup import Guard

LEAD = "lead0@rcpt.example"

# (name, scripted reply, row status, attempts counted, mailbox state afterwards, server has the message).
# Quota and rate limits reroute without using an attempt; the parked mailbox then holds the row back (queued).
TABLE = [
    ("quota", Scripted("data", "550 5.4.5 Daily user sending limit exceeded. For more information on Gmail "
                               "sending limits go to https://support.google.com/a/answer/166852"),
     "queued", 0, "daily-limit", False),
    ("rate", Scripted("data", "421 4.7.28 Our system has detected an unusual rate of unsolicited mail "
                              "originating from your IP address."),
     "queued", 0, "cooldown", False),
    ("recipient", Scripted("rcpt", "550 5.1.1 The email account that you tried to reach does not exist. Please "
                                   "try double-checking the recipient's email address for typos"),
     "suppressed", 1, "ready", False),
    # The recipient's full mailbox: this step fails, the address is kept and our mailbox is not at fault.
    ("full mailbox", Scripted("rcpt", "552 5.2.2 The email account that you tried to reach is over quota. Please "
                                      "direct the recipient to https://support.google.com/mail/?p=OverQuotaPerm"),
     "failed", 1, "ready", False),
    ("content", Scripted("data", "550 5.7.1 This message was blocked because its content presents a potential "
                                 "security issue."),
     "failed", 1, "ready", False),
    ("transient", Scripted("data", "451 4.3.0 Mail server temporarily rejected message."),
     "retry", 1, "ready", False),
    ("timeout after DATA", Scripted("hang", hang_s=3.0), "unconfirmed", 1, "ready", True),
]


def _run_once(world: World, smtp_timeout_s: float = 1.0) -> None:
    agent, factory = world.agent(smtp_timeout_s=smtp_timeout_s)
    agent.run(factory, 1, once=True, stop=threading.Event())


def _mailbox_state(world: World, address: str) -> tuple[str, int]:
    with Guard.from_url(world.redis_url) as guard:
        (status,) = guard.status([address])
    return status.state, status.reserved  # counted against the cap: confirmed and kept reservations


@pytest.mark.parametrize(("name", "scripted", "row_status", "attempts", "mailbox_state", "delivered"), TABLE,
                         ids=[t[0] for t in TABLE])
def test_provider_reply_drives_the_outcome(tmp_path: Path, database_url: str, redis_url: str,
                                           submission: SubmissionServer, name: str, scripted: Scripted,
                                           row_status: str, attempts: int, mailbox_state: str,
                                           delivered: bool) -> None:
    world = make_world(tmp_path, database_url, redis_url, submission, mailboxes=1)
    submission.recorder.script[LEAD] = scripted
    world.enqueue(1)
    _run_once(world)
    with Ledger.from_url(database_url) as ledger:
        shown = ledger.show("L0", 1)
        suppressed = ledger.is_suppressed(LEAD)
    assert shown is not None
    assert (shown.row["status"], shown.row["attempts"]) == (row_status, attempts), shown.events
    assert suppressed is (name == "recipient")
    # a recipient refused at RCPT is a hard bounce of the mailbox, as the same refusal in a DSN would be
    assert ("bounce" in [e["kind"] for e in shown.events]) is (name == "recipient")
    assert [(f["event"], f["source"]) for f in shown.feedback] == ([("bounced", "agent")] if name == "recipient"
                                                                  else [])
    assert bool(submission.recorder.received) is delivered
    state, sent = _mailbox_state(world, world.mailboxes[0])
    assert state == mailbox_state
    if name == "timeout after DATA":
        assert sent == 1  # the reservation is kept: an unknown send counts against the cap
        assert "check Sent Items" in (shown.row["last_error"] or "")
    if name == "transient":
        assert shown.row["not_before"] > datetime.now(UTC) + timedelta(minutes=29)


def test_unconfirmed_is_never_retried(world: World) -> None:
    world.server.recorder.script[LEAD] = Scripted("hang", hang_s=3.0)
    world.enqueue(1)
    _run_once(world)
    world.server.recorder.script.clear()
    with Ledger.from_url(world.database_url) as ledger:
        assert ledger.sweep(0) == (0, 0)
    _run_once(world)
    assert len(world.server.recorder.received) == 1


def test_an_unknown_outcome_counts_against_the_day_rebuilt_from_the_ledger(tmp_path: Path, database_url: str,
                                                                           redis_url: str,
                                                                           submission: SubmissionServer) -> None:
    """A timeout after the end of DATA keeps its reservation (the provider may have sent it). When Redis loses the
    day's counters, the ones rebuilt from the ledger still count that attempt, beside the accepted send."""
    clear_of_midnight()
    world = make_world(tmp_path, database_url, redis_url, submission, mailboxes=1)
    submission.recorder.script[LEAD] = Scripted("hang", hang_s=3.0)
    world.enqueue(2)  # lead0 times out after DATA, lead1 is accepted
    _run_once(world)
    with Ledger.from_url(database_url) as ledger:
        shown = [ledger.show(f"L{n}", 1) for n in range(2)]
    assert [s.row["status"] if s else None for s in shown] == ["unconfirmed", "sent"]
    assert _mailbox_state(world, world.mailboxes[0]) == ("ready", 2)
    client = redis.Redis.from_url(redis_url)
    client.flushall()
    client.close()
    agent, factory = world.agent()
    with factory() as ledger:
        agent.prepare(ledger)  # what an agent does at its start: the counters come back from the ledger
    assert _mailbox_state(world, world.mailboxes[0]) == ("ready", 2)


def test_auth_failure_disconnects_the_mailbox_and_reroutes(tmp_path: Path, database_url: str, redis_url: str,
                                                           submission: SubmissionServer) -> None:
    world = make_world(tmp_path, database_url, redis_url, submission, mailboxes=2,
                       passwords={"box0@sender.example": "wrong"})
    world.enqueue(4)
    _run_once(world)
    # box0 failed its login once (535 5.7.8) and was disconnected; box1 sent everything, no attempt was used up.
    received = world.server.recorder.received
    assert sorted(r.rcpt for r in received) == [f"lead{n}@rcpt.example" for n in range(4)]
    assert {r.mail_from for r in received} == {"box1@sender.example"}
    assert _mailbox_state(world, "box0@sender.example")[0] == "paused"
    with Ledger.from_url(database_url) as ledger:
        rows = [ledger.show(f"L{n}", 1) for n in range(4)]
    assert all(r is not None and (r.row["status"], r.row["attempts"]) == ("sent", 1) for r in rows)
    assert any(e["kind"] == "reroute" for r in rows if r is not None for e in r.events)


def test_secret_file_lost_mid_run_disconnects_only_that_mailbox(tmp_path: Path, database_url: str,
                                                                 redis_url: str, submission: SubmissionServer) -> None:
    world = make_world(tmp_path, database_url, redis_url, submission, mailboxes=2)
    world.enqueue(2)
    agent, factory = world.agent(smtp_timeout_s=1.0)
    (tmp_path / "box0@sender.example.pw").unlink()  # after start-up, which checks every secret
    agent.run(factory, 1, once=True, stop=threading.Event())
    assert {r.mail_from for r in world.server.recorder.received} == {"box1@sender.example"}
    assert len(world.server.recorder.received) == 2
