"""A reply ends a sequence, read the way the agent reads it (issue 24, "Must hold"): the lead's reply lands in the
inbox of the mailbox that sent step 1 on a real IMAP server (dovecot), the inbox reader (sender.feedback.inbox)
finds the row it answers, and the follow-up already created for three days later never reaches the submission
server, while the lead beside it, who did not reply, gets every step."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from sender import Ledger
from sender.feedback.inbox import read_all
from sender.ledger.events import Feedback
from tests.sender.sequences import DAY_S, arrivals, check_thread, ended, one_pass, set_up_campaign, statuses
from tests.sender.world import World, make_world
from tests.support.clock import FakeClock
from tests.support.dovecot import Dovecot, dovecot_server
from tests.support.submission import SubmissionServer

MAILBOXES = [f"box{n}@sender.example" for n in range(4)]
REPLIER, CONTROL = "ann@rcpt.example", "bob@rcpt.example"


@pytest.fixture(scope="module")
def imap() -> Iterator[Dovecot]:
    # the world's mailboxes log in to IMAP with their smtp password (tests/sender/world.py)
    with dovecot_server({box: f"pw-{box}" for box in MAILBOXES}) as server:
        yield server


@pytest.fixture
def imap_world(tmp_path: Path, database_url: str, redis_url: str, submission: SubmissionServer, clock: FakeClock,
               imap: Dovecot) -> World:
    today = datetime.fromtimestamp(clock(), UTC).date()
    return make_world(tmp_path, database_url, redis_url, submission, start=today - timedelta(days=90),
                      imap=f"host: {imap.host}, port: {imap.imaps_port}, security: tls, ca_file: '{imap.ca_file}'")


def _reply(to_mailbox: str, message_id: str, threaded: bool) -> bytes:
    threading_headers = f"In-Reply-To: {message_id}\r\nReferences: {message_id}\r\n" if threaded else ""
    return (f"From: Ann <{REPLIER}>\r\nTo: {to_mailbox}\r\nSubject: Re: Hello Ann\r\n"
            "Date: Mon, 30 Nov 2026 10:00:00 +0000\r\nMessage-ID: <reply-ann@rcpt.example>\r\n"
            f"{threading_headers}MIME-Version: 1.0\r\nContent-Type: text/plain\r\n\r\n"
            "Sounds interesting, call me on Thursday.\r\n").encode()


@pytest.mark.parametrize("threaded", [True, False], ids=["in-reply-to", "unthreaded"])
def test_a_reply_read_from_the_inbox_before_step_two_is_due_means_step_two_is_never_sent(
        tmp_path: Path, imap_world: World, imap: Dovecot, clock: FakeClock, threaded: bool) -> None:
    agent, factory = imap_world.clocked_agent(clock)

    def run_agent() -> None:
        one_pass(agent, factory, workers=2)

    with Ledger.from_url(imap_world.database_url, clock=clock) as ledger:
        set_up_campaign(tmp_path, ledger, "q1", [(REPLIER, "Ann", "Acme"), (CONTROL, "Bob", "Bobco")])
        run_agent()
        (first,) = arrivals(imap_world.server.recorder.snapshot(), imap_world.database_url)[REPLIER]
        assert statuses(imap_world.database_url, "q1")[REPLIER] == ["sent", "queued"]  # step 2 waits 3 days

        clock.advance(DAY_S)  # a day later the lead answers, in the inbox of the mailbox that wrote to them
        imap.append(first.received.login, _reply(first.received.login, first.received.message_id, threaded))
        inventory = imap_world.context().app.require_inventory()
        reports = read_all(Feedback(ledger), list(inventory.mailboxes), env={})
        assert {r.mailbox: (r.error, r.outcomes["replied"]) for r in reports} == {
            box: (None, int(box == first.received.login)) for box in MAILBOXES}

    for _ in range(2):  # step 2's day, then step 3's
        clock.advance(4 * DAY_S)
        run_agent()
    got = arrivals(imap_world.server.recorder.snapshot(), imap_world.database_url)
    assert [a.step for a in got[REPLIER]] == [1]
    check_thread(CONTROL, got[CONTROL], "Hello Bob")
    assert [a.step for a in got[CONTROL]] == [1, 2, 3]
    assert ended(imap_world.database_url, "q1") == {REPLIER: "replied", CONTROL: "completed"}
    assert statuses(imap_world.database_url, "q1")[REPLIER] == ["replied", "cancelled"]
