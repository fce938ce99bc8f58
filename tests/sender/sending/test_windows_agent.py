"""Sending windows through the real send path: the agent (on a simulated clock) against a real ledger, Redis and
submission server hands nothing over outside the lead's window: the claim does not take a row outside it (nothing
reserved, nothing put back), and takes it once the window opens."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import psycopg
import pytest

from sender import Ledger
from sender.campaigns.spec import load_campaign
from sender.campaigns.window import Schedule
from sender.ledger.campaigns import Campaigns
from sender.ledger.window_wait import window_wait
from sender.sending.agent import Agent
from tests.sender.clocked import clocked_agent
from tests.sender.sequences import start_campaign
from tests.sender.world import World, make_world
from tests.support.clock import FakeClock
from tests.support.submission import SubmissionServer

BERLIN = ZoneInfo("Europe/Berlin")
NEW_YORK = ZoneInfo("America/New_York")
MONDAY = datetime(2026, 12, 7, tzinfo=BERLIN)  # a week without a DST change in either zone
WINDOW = 'timezone: Europe/Berlin\nwindow: {days: [mon, tue, wed, thu, fri], hours: ["09:00-17:00"]}\n'
CAMPAIGN = """\
name: {name}
group: sales
steps:
  - subject: "Hello"
    body: "Hi"
  - delay: {delay}
    body: "Following up"
"""


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(MONDAY.timestamp())


@pytest.fixture
def paced(tmp_path: Path, database_url: str, redis_url: str, submission: SubmissionServer) -> World:
    return make_world(tmp_path, database_url, redis_url, submission, mailboxes=2,
                      start=date(2025, 11, 1))  # warmed up by every week the tests simulate


@pytest.fixture
def agent(paced: World, clock: FakeClock) -> Iterator[tuple[Agent, Ledger]]:
    built, factory = clocked_agent(paced.context(), clock)
    with factory() as ledger:
        built.prepare(ledger)
        yield built, ledger


def _campaign(tmp_path: Path, ledger: Ledger, leads: str, *, name: str = "paced", delay: str = "1d",
              pacing: str = WINDOW) -> Path:
    return start_campaign(tmp_path, ledger, name, CAMPAIGN.format(name=name, delay=delay) + pacing, leads)


def _drain(agent: Agent, ledger: Ledger, on_send: Callable[[], None] | None = None) -> list[str]:
    kinds = []
    while (report := agent.send_one(ledger, "w")) is not None:
        kinds.append(report.kind)
        if on_send is not None:
            on_send()
    return kinds


# a plain week, and one across Europe's spring-forward (Sunday 29 March), after New York's (8 March) moved it an
# hour closer to Berlin
@pytest.mark.parametrize("monday", [MONDAY, datetime(2026, 3, 23, tzinfo=BERLIN)], ids=["december", "march-dst"])
def test_over_a_simulated_week_nothing_arrives_outside_each_leads_window(
        tmp_path: Path, paced: World, agent: tuple[Agent, Ledger], clock: FakeClock, monday: datetime) -> None:
    sender, ledger = agent
    clock.now_s = monday.timestamp()
    berlin = [f"b{n}@rcpt.example" for n in range(3)]
    new_york = [f"n{n}@rcpt.example" for n in range(3)]
    # Berlin leads have no time zone of their own (the campaign's), New York leads name theirs
    _campaign(tmp_path, ledger, "".join(f"{a},\n" for a in berlin) + "".join(f"{a},America/New_York\n"
                                                                             for a in new_york), delay="4d10h")
    schedule = Schedule((0, 1, 2, 3, 4), load_campaign(tmp_path / "paced.yml").pacing.window.hours)  # type: ignore[union-attr]
    zone_of = {**dict.fromkeys(berlin, BERLIN), **dict.fromkeys(new_york, NEW_YORK)}
    received = paced.server.recorder.received
    outside: list[tuple[str, str]] = []
    arrivals: list[tuple[str, datetime]] = []

    def check() -> None:
        for message in received[len(arrivals):]:
            rcpt = message.rcpt
            arrivals.append((rcpt, datetime.fromtimestamp(clock.now_s, UTC)))
            if not schedule.is_open(datetime.fromtimestamp(clock.now_s, UTC), zone_of[rcpt]):
                outside.append((rcpt, datetime.fromtimestamp(clock.now_s, UTC).astimezone(zone_of[rcpt]).isoformat()))

    end = monday.timestamp() + 8 * 86400  # to the next Monday's window, past the DST change
    while clock.now_s < end:
        _drain(sender, ledger, check)
        due = ledger.next_due_s(sender.groups)
        clock.now_s += 900 if due is None else min(max(due, 1.0), 900)
    assert outside == []
    # each lead got both steps, the first on Monday from its window's first opening (09:00 in its own zone): the
    # first sends at the opening, the rest spread after it by the pace (three leads, two mailboxes)
    assert sorted(r for r, _ in arrivals) == sorted([*berlin, *new_york] * 2)
    firsts = {r: when for r, when in reversed(arrivals)}
    assert _local_days(firsts, berlin, BERLIN, "%a") == ({"Mon"}, "09:00")
    assert _local_days(firsts, new_york, NEW_YORK, "%a") == ({"Mon"}, "09:00")
    # a follow-up due 4 days 10 hours after a Monday send falls on Friday evening, outside the window: it waits
    # for the next Monday's opening (09:00) in its lead's zone, across the DST change of the March week
    seconds = {r: when for r, when in arrivals}
    next_monday = (monday + timedelta(days=7)).date().isoformat()
    assert _local_days(seconds, berlin, BERLIN, "%F") == ({next_monday}, "09:00")
    assert _local_days(seconds, new_york, NEW_YORK, "%F") == ({next_monday}, "09:00")


def _local_days(when: dict[str, datetime], leads: list[str], tz: ZoneInfo, day: str) -> tuple[set[str], str]:
    """The local days (as `day` formats them) the leads' sends fell on, and the local time of the earliest."""
    local = sorted(when[r].astimezone(tz) for r in leads)
    return {t.strftime(day) for t in local}, local[0].strftime("%H:%M")


def test_a_row_due_friday_at_18_goes_monday_at_9(tmp_path: Path, paced: World, agent: tuple[Agent, Ledger],
                                                 clock: FakeClock, database_url: str) -> None:
    sender, ledger = agent
    clock.now_s = datetime(2026, 12, 11, 18, 0, tzinfo=BERLIN).timestamp()
    _campaign(tmp_path, ledger, "eve@rcpt.example,\n")
    assert _drain(sender, ledger) == []  # not claimed: nothing to put back
    # due, for an idle agent, when its window opens: Monday 09:00 in Berlin
    assert ledger.next_due_s(sender.groups) == (datetime(2026, 12, 14, 9, 0, tzinfo=BERLIN).timestamp() - clock.now_s)
    with psycopg.connect(database_url) as conn:
        (unclaimed,) = conn.execute("SELECT count(*) FROM sender_events WHERE kind = 'unclaimed'").fetchone() or (0,)
    assert unclaimed == 0
    # `campaign status` counts it as waiting for the window, which opens Monday 09:00 at Berlin's offset
    spec = Campaigns(ledger).spec("paced")
    assert spec is not None
    wait = window_wait(ledger, spec)
    assert wait is not None and (wait.rows, wait.as_json()["opens"]) == (1, "2026-12-14T09:00:00+01:00")
    clock.now_s = datetime(2026, 12, 14, 8, 59, 59, tzinfo=BERLIN).timestamp()
    assert _drain(sender, ledger) == []
    assert paced.server.recorder.received == []
    clock.now_s += 1
    assert _drain(sender, ledger) == ["sent"]
    assert [m.rcpt for m in paced.server.recorder.received] == ["eve@rcpt.example"]


def test_a_row_outside_its_window_is_not_claimed_and_reserves_no_mailbox(
        tmp_path: Path, agent: tuple[Agent, Ledger], clock: FakeClock) -> None:
    sender, ledger = agent
    clock.now_s = datetime(2026, 12, 12, 12, 0, tzinfo=BERLIN).timestamp()  # Saturday noon
    _campaign(tmp_path, ledger, "eve@rcpt.example,America/New_York\n")
    assert sender.send_one(ledger, "w") is None  # nothing due the claim may take
    assert ledger.next_due_s(sender.groups) == (datetime(2026, 12, 14, 9, 0, tzinfo=NEW_YORK).timestamp()
                                                - clock.now_s)
    assert all(s.sent == 0 and s.reserved == 0 for s in sender.guard.status(["box0@sender.example",
                                                                                 "box1@sender.example"]))


def test_an_applied_change_of_the_window_reaches_the_agent_on_the_next_claim(
        tmp_path: Path, agent: tuple[Agent, Ledger], clock: FakeClock, database_url: str) -> None:
    sender, ledger = agent
    clock.now_s = datetime(2026, 12, 12, 12, 0, tzinfo=BERLIN).timestamp()  # Saturday noon
    path = _campaign(tmp_path, ledger, "eve@rcpt.example,\n")
    assert _drain(sender, ledger) == []
    weekend = WINDOW.replace("fri]", "fri, sat, sun]")
    path.write_text(CAMPAIGN.format(name="paced", delay="1d") + weekend)
    Campaigns(ledger).apply(load_campaign(path, {"sales"}), path.read_text())
    assert _drain(sender, ledger) == ["sent"]  # nothing was put back until Monday: the new window holds at once


def test_rows_of_enqueue_have_no_window(paced: World, agent: tuple[Agent, Ledger], clock: FakeClock) -> None:
    sender, ledger = agent
    clock.now_s = datetime(2026, 12, 13, 3, 0, tzinfo=BERLIN).timestamp()  # Sunday night
    ledger.enqueue(lead="L1", step=1, address="eve@rcpt.example", group="sales", subject="Hello", text="Hi")
    assert _drain(sender, ledger) == ["sent"]


def test_skip_dates_hold_a_row_to_the_next_open_day(tmp_path: Path, agent: tuple[Agent, Ledger], clock: FakeClock,
                                                   database_url: str) -> None:
    sender, ledger = agent
    clock.now_s = datetime(2026, 12, 24, 10, 0, tzinfo=BERLIN).timestamp()  # a Thursday, skipped, as is Friday
    _campaign(tmp_path, ledger, "eve@rcpt.example,\n", pacing=WINDOW + "skip_dates: [2026-12-24, 2026-12-25]\n")
    assert _drain(sender, ledger) == []
    opens = datetime(2026, 12, 28, 9, 0, tzinfo=BERLIN)
    assert ledger.next_due_s(sender.groups) == opens.timestamp() - clock.now_s
    assert opens.weekday() == 0
    clock.now_s = opens.timestamp()
    assert _drain(sender, ledger) == ["sent"]


def test_a_step_held_by_an_automatic_reply_goes_at_the_first_window_opening_after_the_hold(
        tmp_path: Path, paced: World, agent: tuple[Agent, Ledger], clock: FakeClock, database_url: str) -> None:
    from sender.ledger.events import Event, Feedback

    sender, ledger = agent
    clock.now_s = datetime(2026, 12, 7, 10, 0, tzinfo=NEW_YORK).timestamp()  # Monday, inside eve's window
    _campaign(tmp_path, ledger, "eve@rcpt.example,America/New_York\n")
    assert _drain(sender, ledger) == ["sent"]
    with psycopg.connect(database_url) as conn:
        (first,) = conn.execute("SELECT id FROM sender_emails WHERE step = 1").fetchone() or (0,)
    # "back on Friday 11 December": held until Saturday 00:00 on eve's clock; the window opens Monday 09:00
    feedback = Feedback(ledger)
    feedback.apply(first, Event.AUTO_REPLIED, source="inbox", ref="ooo-1")
    assert feedback.hold(first, date(2026, 12, 12), "an automatic reply: back on 2026-12-11") == 1
    clock.now_s = datetime(2026, 12, 8, 11, 0, tzinfo=NEW_YORK).timestamp()  # step 2's own day
    assert _drain(sender, ledger) == []
    clock.now_s = datetime(2026, 12, 12, 0, 0, tzinfo=NEW_YORK).timestamp()  # the hold is over: a Saturday
    assert _drain(sender, ledger) == []
    clock.now_s = datetime(2026, 12, 14, 8, 59, 59, tzinfo=NEW_YORK).timestamp()
    assert _drain(sender, ledger) == []
    clock.now_s += 1
    assert _drain(sender, ledger) == ["sent"]
    assert [m.rcpt for m in paced.server.recorder.received] == ["eve@rcpt.example"] * 2
