"""The provider's spam rate into the warm-up gates (sender.postmaster.sync), on a real ledger and a real Redis, with
Google's API played by a local FAKE (tests/support/postmaster_fake.py): the fake's figures drive a domain to hold
and then to pause, naming the domain, the day and the figure; a day Google has no ratio for is stored as no data,
never 0, and changes nothing; a figure is told to the gates once, so a person's resume stands until a new one."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta

import pytest
import redis

from sender import Ledger
from sender.postmaster.api import Credentials, PostmasterApi
from sender.postmaster.sync import latest, sync
from tests.support.postmaster_fake import FakePostmasterTools, fake_postmaster_tools
from warmup import Guard
from warmup.keys import domain_health

pytestmark = pytest.mark.service  # each test serves the fake on loopback

DOMAIN = "sender.example"
BOX = f"box0@{DOMAIN}"
OTHER = "box1@other.example"
TODAY = datetime.now(UTC).date()


class Token(Credentials):
    account = "ops@sender.example"
    fix_refused = "run sendhost postmaster authorize"

    def token(self, refused: str | None = None) -> str:
        return "good-token"


@pytest.fixture
def fake() -> Iterator[FakePostmasterTools]:
    with fake_postmaster_tools() as served:
        served.add_domain(DOMAIN)
        yield served


@pytest.fixture
def guard(redis_url: str) -> Iterator[Guard]:
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    opened = Guard(client)
    for address in (BOX, OTHER):
        opened.add_mailbox(address, start=TODAY - timedelta(days=30), timezone="UTC", min_gap_s=0, jitter_s=(0, 0))
    yield opened
    client.close()


def _sync(fake: FakePostmasterTools, ledger: Ledger, guard: Guard) -> list[tuple[date, float, str, tuple[str, ...]]]:
    api = PostmasterApi(fake.url, Token(), sleep=lambda s: None)
    result = sync(api, ledger, guard, [DOMAIN], TODAY, days=14)
    (domain,) = result.domains
    assert domain.problem is None
    return [(t.day, t.ratio, t.verdict, t.paused) for t in domain.told]


def _state(guard: Guard, address: str = BOX) -> tuple[str, str | None]:
    (status,) = guard.status([address])
    return status.state, status.reason


def _snapshot(guard: Guard, redis_url: str) -> tuple[object, ...]:
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    try:
        health = client.hgetall(domain_health(DOMAIN))
    finally:
        client.close()
    return health, _state(guard), guard.plan(BOX, 45)


def test_the_fake_drives_a_domain_to_hold_then_to_pause(fake: FakePostmasterTools, ledger: Ledger,
                                                        guard: Guard) -> None:
    held_day, paused_day = TODAY - timedelta(days=3), TODAY - timedelta(days=2)
    fake.set_day(DOMAIN, TODAY - timedelta(days=4), 0.0002)
    fake.set_day(DOMAIN, held_day, 0.0015, reputation="MEDIUM")
    assert _sync(fake, ledger, guard) == [(TODAY - timedelta(days=4), 0.0002, "ok", ()),
                                          (held_day, 0.0015, "hold", ())]
    assert _state(guard)[0] == "ready"  # a hold stops the ramp, it does not stop sending
    plan = {d.day: d for d in guard.plan(BOX, 31)}
    assert plan[held_day + timedelta(days=1)].state == "held"  # the day after a hold earns no step
    assert _state(guard, OTHER)[0] == "ready"  # another domain's mailbox hears nothing

    fake.set_day(DOMAIN, paused_day, 0.0042, reputation="LOW")
    assert _sync(fake, ledger, guard) == [(paused_day, 0.0042, "pause", (BOX,))]  # the held day is not told again
    state, reason = _state(guard)
    assert state == "paused"
    assert reason == f"spam rate 0.42% on {paused_day} for {DOMAIN} is at or above 0.3%"
    assert {d.day: d for d in guard.plan(BOX, 31)}[paused_day + timedelta(days=1)].state == "stepped-back"
    assert _state(guard, OTHER)[0] == "ready"
    (last,) = latest(ledger)
    assert (last.domain, last.day, last.spam_ratio, last.reputation) == (DOMAIN, paused_day, 0.0042, "LOW")


def test_no_data_changes_nothing(fake: FakePostmasterTools, ledger: Ledger, guard: Guard, redis_url: str) -> None:
    """Days Google does not report (too little mail) and a day it reports without a ratio: stored as no data, told
    to no gate; the guard's health, state and plan are as they were."""
    fake.set_day(DOMAIN, TODAY - timedelta(days=5), 0.0001)
    _sync(fake, ledger, guard)
    before = _snapshot(guard, redis_url)
    fake.set_day(DOMAIN, TODAY - timedelta(days=3), None, reputation=None)  # an entry without userReportedSpamRatio
    api = PostmasterApi(fake.url, Token(), sleep=lambda s: None)
    (domain,) = sync(api, ledger, guard, [DOMAIN], TODAY, days=14).domains
    assert domain.told == () and domain.problem is None
    assert TODAY - timedelta(days=3) in domain.missing and TODAY - timedelta(days=1) in domain.missing
    assert _snapshot(guard, redis_url) == before
    stored = {day: ratio for day, ratio, _rep, _at in ledger.fetch_all(
        "postmaster_days", {"domain": DOMAIN, "since": TODAY - timedelta(days=30)}, "test")}
    assert stored == {TODAY - timedelta(days=5): 0.0001, TODAY - timedelta(days=3): None}  # no data: NULL, never 0
    (last,) = latest(ledger)
    assert (last.day, last.spam_ratio, last.last_reported) == (TODAY - timedelta(days=5), 0.0001,
                                                               TODAY - timedelta(days=3))


def test_a_resume_stands_until_google_revises_the_figure(fake: FakePostmasterTools, ledger: Ledger,
                                                         guard: Guard) -> None:
    day = TODAY - timedelta(days=2)
    fake.set_day(DOMAIN, day, 0.005)
    assert [t[2] for t in _sync(fake, ledger, guard)] == ["pause"]
    guard.resume(BOX)
    assert _sync(fake, ledger, guard) == []  # the same figure read again: not told again
    assert _state(guard)[0] == "ready"
    fake.set_day(DOMAIN, day, 0.0036)  # Google revised the day: still over the line
    assert _sync(fake, ledger, guard) == [(day, 0.0036, "pause", (BOX,))]
    assert _state(guard)[0] == "paused"


def test_a_domain_the_account_does_not_see_is_named_with_the_fix(fake: FakePostmasterTools, ledger: Ledger,
                                                                 guard: Guard) -> None:
    api = PostmasterApi(fake.url, Token(), sleep=lambda s: None)
    result = sync(api, ledger, guard, ["other.example"], TODAY, days=14)
    (domain,) = result.problems
    assert domain.problem == ("other.example is not in Postmaster Tools for ops@sender.example: add and verify it "
                              "at https://postmaster.google.com")
    assert latest(ledger) == []


def test_a_figure_redis_lost_is_told_again(fake: FakePostmasterTools, ledger: Ledger, guard: Guard,
                                           redis_url: str) -> None:
    """The ledger is the record: when Redis lost the domain's rates (and with them the pause), the next sync tells
    the gates again, as the send counters are rebuilt from the ledger."""
    day = TODAY - timedelta(days=2)
    fake.set_day(DOMAIN, day, 0.0033)
    assert [t[2] for t in _sync(fake, ledger, guard)] == ["pause"]
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    try:
        client.delete(domain_health(DOMAIN))  # what a Redis that came back empty holds of the domain
    finally:
        client.close()
    guard.resume(BOX)
    assert _sync(fake, ledger, guard) == [(day, 0.0033, "pause", (BOX,))]
    assert guard.spam_rates(DOMAIN) == {day: 0.0033}
