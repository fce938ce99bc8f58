"""A three-step campaign as the submission server sees it (issue 24, "Must hold"): a real PostgreSQL, Redis and
aiosmtpd with AUTH, the agent, its guard, pool and ledger on one simulated clock, so that days pass at once.

Each lead's steps arrive in order, once each, from the one mailbox (AUTH user, envelope and From) that sent its
first; step 1 has its own rendered subject, every later step replies in its thread; and after a reply, a bounce,
an unsubscribe, a refusal or an unknown end nothing more arrives. A 4xx on step 1 delays its follow-up from the
send that succeeded, not the first attempt. One address in two campaigns, however it is spelled, gets one sequence.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest

from sender import Ledger
from sender.ledger.campaigns import LeadOutcome
from sender.ledger.events import Event, Feedback
from tests.sender.sequences import (
    DAY_S,
    Arrival,
    arrivals,
    body_of,
    body_text,
    check_thread,
    ended,
    one_pass,
    set_up_campaign,
    statuses,
    subject_of,
)
from tests.sender.world import World, make_world
from tests.support.clock import FakeClock
from tests.support.submission import Scripted, SubmissionServer

SMTP_TIMEOUT_S = 3.0
HANG_S = 5.0  # the server's silence after DATA: longer than the agent's SMTP timeout

CONTENT_REFUSAL = "550 5.7.1 This message was blocked because its content presents a potential security issue."
ADDRESS_GONE = "550 5.1.1 The email account that you tried to reach does not exist."
TRY_LATER = "451 4.3.0 Mail server temporarily rejected message."


@pytest.fixture
def clocked_world(tmp_path: Path, database_url: str, redis_url: str, submission: SubmissionServer,
                  clock: FakeClock) -> World:
    """Four mailboxes of group `sales`, each 90 days into its warm-up on the simulated clock's day."""
    today = datetime.fromtimestamp(clock(), UTC).date()
    return make_world(tmp_path, database_url, redis_url, submission, start=today - timedelta(days=90))


@pytest.fixture
def ledger(clocked_world: World, clock: FakeClock) -> Iterator[Ledger]:
    with Ledger.from_url(clocked_world.database_url, clock=clock) as opened:
        yield opened


@pytest.fixture
def run_agent(clocked_world: World, clock: FakeClock) -> Callable[[], None]:
    """One pass of the agent (3 workers) over everything due at the clock's time."""
    agent, factory = clocked_world.clocked_agent(clock, smtp_timeout_s=SMTP_TIMEOUT_S)
    return lambda: one_pass(agent, factory)


def _received(world: World) -> dict[str, list[Arrival]]:
    return arrivals(world.server.recorder.snapshot(), world.database_url)


# email, first_name, company; and what becomes of the lead
LEADS = [
    ("ann@rcpt.example", "Ann", "Acme"),    # all three steps
    ("bob@rcpt.example", "Bob", ""),        # all three, {company|your team} by its fallback
    ("cat@rcpt.example", "", "Cato"),       # all three, {first_name|there} by its fallback
    ("dan@rcpt.example", "Dan", "Dover"),   # replies to step 1
    ("eve@rcpt.example", "Eve", "Evco"),    # step 2 bounces
    ("fay@rcpt.example", "Fay", "Fabco"),   # unsubscribes after step 1
    ("gus@rcpt.example", "Gus", "Gusto"),   # step 2 refused for its content (5xx): failed
    ("hal@rcpt.example", "Hal", "Halo"),    # step 1 unanswered after DATA: unconfirmed
    ("ivy@rcpt.example", "Ivy", "Ivco"),    # step 2 refused, the address gone: suppressed
]
ARRIVED = {"ann@rcpt.example": 3, "bob@rcpt.example": 3, "cat@rcpt.example": 3, "dan@rcpt.example": 1,
           "eve@rcpt.example": 2, "fay@rcpt.example": 1, "gus@rcpt.example": 1, "hal@rcpt.example": 1,
           "ivy@rcpt.example": 1}
ENDED = {"ann@rcpt.example": "completed", "bob@rcpt.example": "completed", "cat@rcpt.example": "completed",
         "dan@rcpt.example": "replied", "eve@rcpt.example": "bounced", "fay@rcpt.example": "unsubscribed",
         "gus@rcpt.example": "failed", "hal@rcpt.example": "unconfirmed", "ivy@rcpt.example": "suppressed"}


def test_every_lead_gets_its_steps_in_order_threaded_from_one_mailbox_and_nothing_after_an_end(
        tmp_path: Path, clocked_world: World, ledger: Ledger, clock: FakeClock,
        run_agent: Callable[[], None]) -> None:
    script = clocked_world.server.recorder.script
    set_up_campaign(tmp_path, ledger, "q1", LEADS)
    script["hal@rcpt.example"] = Scripted("hang", hang_s=HANG_S)
    run_agent()
    firsts = {lead: got[0].received.message_id for lead, got in _received(clocked_world).items()}
    assert sorted(firsts) == sorted(a for a, _, _ in LEADS)
    feedback = Feedback(ledger)
    feedback.apply_by_message_id(firsts["dan@rcpt.example"], Event.REPLIED, source="inbox", ref="dan-reply")
    feedback.apply_by_message_id(firsts["fay@rcpt.example"], Event.UNSUBSCRIBED, source="web", ref="fay-click")
    script["gus@rcpt.example"] = Scripted("data", CONTENT_REFUSAL)
    script["ivy@rcpt.example"] = Scripted("rcpt", ADDRESS_GONE)

    clock.advance(3 * DAY_S)
    run_agent()
    eve = _received(clocked_world)["eve@rcpt.example"]
    assert [a.step for a in eve] == [1, 2]
    feedback.apply_by_message_id(eve[1].received.message_id, Event.BOUNCED, source="inbox", ref="eve-dsn")
    clock.advance(4 * DAY_S)
    run_agent()
    clock.advance(30 * DAY_S)  # long after every step was due: nothing more comes
    run_agent()

    got = _received(clocked_world)
    assert {lead: len(messages) for lead, messages in got.items()} == ARRIVED
    for address, first_name, company in LEADS:
        check_thread(address, got[address], subject_of(first_name))
        for arrival in got[address]:
            assert body_text(arrival).startswith(body_of(arrival.step, first_name, company)), (address, arrival.step)
    # step 1 went from the least-used mailbox: the leads are spread over the group
    assert len({messages[0].received.login for messages in got.values()}) == len(clocked_world.mailboxes)
    assert ended(clocked_world.database_url, "q1") == ENDED
    rows = statuses(clocked_world.database_url, "q1")
    assert rows["dan@rcpt.example"] == ["replied", "cancelled"]  # step 2, created at step 1's send, withdrawn
    assert rows["eve@rcpt.example"] == ["sent", "bounced", "cancelled"]
    assert rows["fay@rcpt.example"] == ["unsubscribed", "cancelled"]
    assert rows["gus@rcpt.example"] == ["sent", "failed"]
    assert rows["hal@rcpt.example"] == ["unconfirmed"]
    assert rows["ivy@rcpt.example"] == ["sent", "suppressed"]


def test_a_first_step_deferred_then_accepted_is_followed_up_from_its_real_send(
        tmp_path: Path, clocked_world: World, ledger: Ledger, clock: FakeClock,
        run_agent: Callable[[], None]) -> None:
    deferred, control = "ann@rcpt.example", "bob@rcpt.example"
    set_up_campaign(tmp_path, ledger, "q1", [(deferred, "Ann", "Acme"), (control, "Bob", "Bobco")])
    first_attempt = clock()
    clocked_world.server.recorder.script[deferred] = Scripted("data", TRY_LATER)
    run_agent()
    assert list(_received(clocked_world)) == [control]
    clocked_world.server.recorder.script.clear()
    clock.advance(30 * 60)  # the retry is due
    run_agent()
    sent_at = clock()
    with psycopg.connect(clocked_world.database_url) as conn:
        (attempts, accepted_at, second_due), = conn.execute(
            "SELECT s.attempts, g.accepted_at, f.not_before FROM sender_emails s "
            "JOIN sender_send_log g ON g.email_id = s.id "
            "JOIN sender_emails f ON f.lead_id = s.lead_id AND f.step = 2 "
            "WHERE s.address = %s AND s.step = 1", (deferred,)).fetchall()
    assert attempts == 2 and accepted_at == datetime.fromtimestamp(sent_at, UTC)
    assert second_due == accepted_at + timedelta(days=3)  # not three days after the first attempt

    clock.advance(3 * DAY_S - 60 - 1)  # the control's step 2 is due (3 days after its send), the deferred one's not
    assert clock() > first_attempt + 3 * DAY_S
    run_agent()
    got = _received(clocked_world)
    assert [a.step for a in got[control]] == [1, 2]
    assert [a.step for a in got[deferred]] == [1]
    clock.advance(61)
    run_agent()
    got = _received(clocked_world)
    check_thread(deferred, got[deferred], "Hello Ann")
    assert [a.step for a in got[deferred]] == [1, 2]


@pytest.mark.parametrize(("in_one", "in_two"), [("Eve@Bigco.example", "eve@bigco.example"),
                                               ("eve@bigco.example", "Eve@Bigco.example")],
                         ids=["capitals-in-the-first", "capitals-in-the-second"])
def test_one_address_in_two_campaigns_however_spelled_gets_one_sequence(
        tmp_path: Path, clocked_world: World, ledger: Ledger, clock: FakeClock, run_agent: Callable[[], None],
        in_one: str, in_two: str) -> None:
    _, one = set_up_campaign(tmp_path, ledger, "one", [(in_one, "Eve", "Bigco")])
    _, two = set_up_campaign(tmp_path, ledger, "two", [(in_two, "Eve", "Bigco"), ("frank@bigco.example", "Frank", "")])
    assert one.counts[LeadOutcome.ADDED] == 1
    assert (two.counts[LeadOutcome.ADDED], two.counts[LeadOutcome.OTHER_CAMPAIGN]) == (1, 1)
    for _ in range(3):
        run_agent()
        clock.advance(4 * DAY_S)
    got = _received(clocked_world)
    assert sorted(got) == ["eve@bigco.example", "frank@bigco.example"]
    # one sequence, campaign one's, to the canonical address (RCPT TO and To)
    check_thread("eve@bigco.example", got["eve@bigco.example"], "Hello Eve")
    assert [a.step for a in got["eve@bigco.example"]] == [1, 2, 3]
    with psycopg.connect(clocked_world.database_url) as conn:
        leads = conn.execute("SELECT c.name FROM sender_leads l JOIN sender_campaigns c ON c.id = l.campaign_id "
                             "WHERE l.address = 'eve@bigco.example'").fetchall()
    assert leads == [("one",)]
