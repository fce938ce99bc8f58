"""The campaign's daily cap through the real send path: the agent (on a simulated clock) against a real ledger,
Redis and submission server hands over no more of a campaign's mail on its local day than its cap, first steps and
follow-ups alike, and puts a row back until the campaign's next day."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from datetime import UTC, date, datetime
from email.utils import parsedate_to_datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import psycopg
import pytest
import redis

from sender import Ledger
from sender.campaigns.leads import read_leads
from sender.campaigns.spec import load_campaign
from sender.ledger.campaigns import Campaigns, Move
from sender.sending.agent import Agent
from tests.sender.clocked import clocked_agent
from tests.sender.world import World, make_world
from tests.support.clock import FakeClock
from tests.support.submission import SubmissionServer

BERLIN = ZoneInfo("Europe/Berlin")
MONDAY_NOON = datetime(2026, 12, 7, 12, 0, tzinfo=BERLIN)
CAMPAIGN = """\
name: capped
group: sales
timezone: Europe/Berlin
daily_cap: 3
steps:
  - subject: "Hello"
    body: "Hi"
  - delay: 1h
    body: "Following up"
"""


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(MONDAY_NOON.timestamp())


@pytest.fixture
def world(tmp_path: Path, database_url: str, redis_url: str, submission: SubmissionServer) -> World:
    return make_world(tmp_path, database_url, redis_url, submission, mailboxes=2, start=date(2025, 11, 1))


@pytest.fixture
def agent(world: World, clock: FakeClock) -> Iterator[tuple[Agent, Ledger]]:
    built, factory = clocked_agent(world.context(), clock)
    with factory() as ledger:
        built.prepare(ledger)
        yield built, ledger


def _start(tmp_path: Path, ledger: Ledger, text: str) -> Campaigns:
    path = tmp_path / "capped.yml"
    path.write_text(text)
    spec = load_campaign(path, {"sales"})
    campaigns = Campaigns(ledger)
    campaigns.apply(spec, text)
    csv = tmp_path / "capped.csv"
    csv.write_text("email\n" + "".join(f"l{n}@rcpt.example\n" for n in range(2)))
    campaigns.add_leads("capped", read_leads(csv, spec).leads)
    campaigns.move("capped", Move.START)
    return campaigns


def _run_until(end: datetime, sender: Agent, ledger: Ledger, clock: FakeClock, world: World,
               arrived: list[datetime], blocked: list[str]) -> None:
    """Drive the agent on the simulated clock up to `end`, noting when each message reached the server."""
    received = world.server.recorder.received
    while clock.now_s < end.timestamp():
        while (report := sender.send_one(ledger, "w")) is not None:
            if report.kind == "blocked":
                blocked.append(report.detail)
            arrived += [datetime.fromtimestamp(clock.now_s, UTC)] * (len(received) - len(arrived))
        due = ledger.next_due_s(sender.groups)
        clock.now_s += 900 if due is None else min(max(due, 1.0), 900)


def test_the_campaign_cap_holds_its_day_and_the_rest_go_on_its_next(
        tmp_path: Path, world: World, agent: tuple[Agent, Ledger], clock: FakeClock, database_url: str) -> None:
    sender, ledger = agent
    _start(tmp_path, ledger, CAMPAIGN)
    arrived: list[datetime] = []
    blocked: list[str] = []
    _run_until(datetime(2026, 12, 8, 23, 0, tzinfo=BERLIN), sender, ledger, clock, world, arrived, blocked)
    # 2 leads x 2 steps: the cap of 3 takes both first steps and one follow-up on Monday (Berlin's day), the last
    # follow-up waits for Tuesday 00:00 in the campaign's time zone
    days = Counter(when.astimezone(BERLIN).date().isoformat() for when in arrived)
    assert days == {"2026-12-07": 3, "2026-12-08": 1}
    assert any("skipped-campaign-cap" in why and "capped" in why for why in blocked)
    tuesday = min(when for when in arrived if when.astimezone(BERLIN).date() == date(2026, 12, 8))
    assert tuesday == datetime(2026, 12, 8, 0, 0, tzinfo=BERLIN)
    assert sender.guard.campaign_counts("sales", "capped", "2026-12-07")[0] == 3
    count, per_mailbox = sender.guard.campaign_counts("sales", "capped", "2026-12-08")
    assert count == 1 and sum(per_mailbox.values()) == 1
    with psycopg.connect(database_url) as conn:
        (sent,) = conn.execute("SELECT count(*) FROM sender_emails WHERE status = 'sent'").fetchone() or (0,)
    assert sent == 4


def test_a_raised_cap_applied_mid_day_reaches_the_running_agent(
        tmp_path: Path, world: World, agent: tuple[Agent, Ledger], clock: FakeClock) -> None:
    """Issue 25: a pacing edit in the campaign file reaches the guard on the agent's next claim (the applied file's
    hash changes), with no restart: with the cap raised from 3 to 4 on Monday evening, a lead added then goes out
    on Monday, while the follow-up the old cap held back keeps its place until Tuesday 00:00."""
    sender, ledger = agent
    campaigns = _start(tmp_path, ledger, CAMPAIGN)
    arrived: list[datetime] = []
    blocked: list[str] = []
    _run_until(datetime(2026, 12, 7, 18, 0, tzinfo=BERLIN), sender, ledger, clock, world, arrived, blocked)
    assert len(arrived) == 3 and any("skipped-campaign-cap" in why for why in blocked)
    raised = CAMPAIGN.replace("daily_cap: 3", "daily_cap: 4")
    path = tmp_path / "capped.yml"
    path.write_text(raised)
    spec = load_campaign(path, {"sales"})
    campaigns.apply(spec, raised)
    csv = tmp_path / "late.csv"
    csv.write_text("email\nlate@rcpt.example\n")
    campaigns.add_leads("capped", read_leads(csv, spec).leads)
    _run_until(datetime(2026, 12, 7, 19, 0, tzinfo=BERLIN), sender, ledger, clock, world, arrived, blocked)
    assert [when.astimezone(BERLIN).date() for when in arrived] == [date(2026, 12, 7)] * 4
    assert world.server.recorder.received[-1].rcpt == "late@rcpt.example"
    assert sender.guard.campaign_counts("sales", "capped", "2026-12-07")[0] == 4


def test_a_redis_that_lost_the_campaigns_count_gets_it_back_from_the_ledger(
        tmp_path: Path, world: World, agent: tuple[Agent, Ledger], clock: FakeClock, redis_url: str) -> None:
    """Redis emptied mid-day, after the campaign reached its cap: the agent rebuilds the campaign's count (and each
    mailbox's share) from the ledger with the mailboxes' counters, so a lead added then waits for the next day
    instead of the campaign sending its cap twice."""
    sender, ledger = agent
    campaigns = _start(tmp_path, ledger, CAMPAIGN)
    arrived: list[datetime] = []
    blocked: list[str] = []
    _run_until(datetime(2026, 12, 7, 18, 0, tzinfo=BERLIN), sender, ledger, clock, world, arrived, blocked)
    assert len(arrived) == 3
    shares = Counter(r.mail_from.lower() for r in world.server.recorder.received)
    client = redis.Redis.from_url(redis_url)
    client.flushall()
    client.close()
    csv = tmp_path / "late.csv"
    csv.write_text("email\nlate@rcpt.example\n")
    campaigns.add_leads("capped", read_leads(csv, load_campaign(tmp_path / "capped.yml", {"sales"})).leads)
    _run_until(datetime(2026, 12, 7, 23, 0, tzinfo=BERLIN), sender, ledger, clock, world, arrived, blocked)
    assert len(arrived) == 3
    assert sender.guard.campaign_counts("sales", "capped", "2026-12-07") == (3, dict(shares))
    _run_until(datetime(2026, 12, 8, 0, 30, tzinfo=BERLIN), sender, ledger, clock, world, arrived, blocked)
    days = Counter(when.astimezone(BERLIN).date().isoformat() for when in arrived)
    assert days == {"2026-12-07": 3, "2026-12-08": 2}  # Tuesday: the follow-up held back, the late lead's first


def test_the_date_header_is_the_agents_clock(tmp_path: Path, world: World, agent: tuple[Agent, Ledger],
                                             clock: FakeClock) -> None:
    """The Date a recipient reads is the time the agent sent at (its clock, simulated here), not the machine's."""
    sender, ledger = agent
    _start(tmp_path, ledger, CAMPAIGN)
    arrived: list[datetime] = []
    _run_until(datetime(2026, 12, 7, 13, 0, tzinfo=BERLIN), sender, ledger, clock, world, arrived, [])
    dates = [parsedate_to_datetime(r.message["Date"]) for r in world.server.recorder.received]
    assert dates and dates == arrived
