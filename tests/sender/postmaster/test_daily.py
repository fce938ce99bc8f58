"""The agent's daily Postmaster Tools sync (sender.postmaster.daily through Agent's `daily`), with Google played by a
local FAKE (tests/support/postmaster_fake.py): an agent whose inventory has sendhost_postmaster reads its domains at
its start, beside its sending, and the gates pause the domain's mailboxes on a figure over 0.3%."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import redis

from sender import Ledger
from sender.postmaster.sync import latest
from tests.sender.world import World, make_world
from tests.support.postmaster_fake import FakePostmasterTools, fake_postmaster_tools, write_service_account_key
from tests.support.submission import SubmissionServer
from warmup import Guard

pytestmark = pytest.mark.service  # the fake is served on loopback


@pytest.fixture
def fake() -> Iterator[FakePostmasterTools]:
    with fake_postmaster_tools() as served:
        yield served


def test_the_agent_reads_its_domains_at_its_start(tmp_path: Path, database_url: str, redis_url: str,
                                                  submission: SubmissionServer, fake: FakePostmasterTools) -> None:
    yesterday = datetime.now(UTC).date() - timedelta(days=1)
    fake.set_day("sender.example", yesterday, 0.0035)
    key = write_service_account_key(fake, tmp_path / "sa.json")
    world: World = make_world(tmp_path, database_url, redis_url, submission, mailboxes=2, extra_yaml=(
        f"    sendhost_postmaster: {{service_account_key_file: '{key}', api_url: '{fake.url}'}}\n"))
    agent, factory = world.agent()
    agent.run(factory, 1, once=True, stop=threading.Event())
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    try:
        guard = Guard(client)
        deadline = time.monotonic() + 20
        while {s.state for s in guard.status(world.mailboxes)} != {"paused"} and time.monotonic() < deadline:
            time.sleep(0.1)
        reasons = {s.reason for s in guard.status(world.mailboxes)}
    finally:
        client.close()
    assert reasons == {f"spam rate 0.35% on {yesterday} for sender.example is at or above 0.3%"}
    with Ledger.from_url(database_url) as ledger:
        (last,) = latest(ledger)
    assert (last.domain, last.day, last.spam_ratio) == ("sender.example", yesterday, 0.0035)
    assert len(fake.asked_for("/trafficStats")) == 1  # once at the start, not at each pass of the loop
