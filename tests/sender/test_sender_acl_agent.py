"""The sender agent as a process, authenticated to Redis as its host's ACL user (ippool.sender_acl): the full send
cycle (the counters' rebuild at start, reserve, lease, submit, confirm, a cancel, release) and, after Redis lost the
warm-up keys, the rebuild from the ledger, all without a single command Redis refused (its ACL LOG stays empty)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from ippool.keys import HostKeys
from ippool.sender_acl import apply_sender_acl, sender_url
from tests.conftest import run_cli
from tests.sender.world import HOST, SLOTS, World, make_world
from tests.support.redis_server import RedisServer, redis_server_with_selectors
from tests.support.submission import SubmissionServer
from warmup import Guard

PASSWORD = "agent-acl-test-password"


@pytest.fixture(scope="module")
def redis7() -> Iterator[RedisServer]:
    with redis_server_with_selectors() as server:
        yield server


@pytest.fixture
def admin(redis7: RedisServer) -> Iterator[redis.Redis]:
    client = redis7.client()
    client.flushall()
    yield client
    for user in client.acl_users():
        if user != "default":
            client.acl_deluser(user)
    client.close()


def run_agent(world: World, redis_url: str) -> None:
    result = run_cli("--inventory", str(world.inventory), "--redis-url", redis_url, "sender", "--database-url",
                     world.database_url, "run", "--once", "--smtp-timeout", "5", cwd=world.tmp, timeout=120)
    assert result.returncode == 0, result.stderr


def used(admin: redis.Redis) -> int:
    return sum(int(admin.hget(HostKeys(HOST).slot(n), "used") or 0) for n in range(len(SLOTS)))


def test_the_agent_runs_its_send_cycle_as_the_sender_user(tmp_path: Path, database_url: str, redis7: RedisServer,
                                                          admin: redis.Redis, submission: SubmissionServer) -> None:
    world = make_world(tmp_path, database_url, redis7.url, submission)
    apply_sender_acl(admin, HOST, PASSWORD)
    url = sender_url(redis7.url, HOST, PASSWORD)
    admin.acl_log_reset()
    world.enqueue(3)
    with world.ledger() as ledger:
        ledger.suppress("lead1@rcpt.example", "unsubscribed")  # its reservation is cancelled (cancel.lua)

    run_agent(world, url)

    assert sorted(r.rcpt for r in submission.recorder.received) == ["lead0@rcpt.example", "lead2@rcpt.example"]
    assert {r.peer for r in submission.recorder.received} <= set(SLOTS)  # leased, never the fallback
    assert used(admin) == 2
    assert admin.zcard(HostKeys(HOST).leases) == 0  # released
    guard = Guard(admin)
    assert sum(s.sent for s in guard.status(world.mailboxes)) == 2  # confirmed
    assert admin.acl_log() == []

    # Redis lost the warm-up keys: the agent re-adds the mailboxes and restores their counters from the ledger
    admin.delete(*admin.keys("sendhost:warmup:*"))
    world.enqueue(2, prefix="M", to=lambda n: f"m{n}@rcpt.example")

    run_agent(world, url)

    assert len(submission.recorder.received) == 4
    assert used(admin) == 4
    assert sum(s.reserved for s in guard.status(world.mailboxes)) == 4  # 2 restored + 2 new
    assert admin.acl_log() == []
