"""The sender agent as a process, authenticated to Redis as its host's ACL user (ippool.sender_acl): the full send
cycle (the counters' rebuild at start, reserve, lease, submit, confirm, a cancel, release: every Lua call an FCALL of
the admin's library) and, after Redis lost the warm-up keys, the rebuild from the ledger, all without a single
command Redis refused (its ACL LOG stays empty), with a grant on its own mailbox group's warm-up keys only."""

from __future__ import annotations

from pathlib import Path

import redis

from ippool.keys import HostKeys
from ippool.sender_acl import apply_sender_acl, sender_url
from tests.conftest import run_cli
from tests.sender.world import HOST, SLOTS, World, make_world
from tests.support.redis_server import RedisServer
from tests.support.submission import SubmissionServer
from warmup import Guard

PASSWORD = "agent-acl-test-password"


def run_agent(world: World, redis_url: str) -> None:
    result = run_cli("--inventory", str(world.inventory), "--redis-url", redis_url, "sender", "--database-url",
                     world.database_url, "run", "--once", "--smtp-timeout", "5", cwd=world.tmp, timeout=120)
    assert result.returncode == 0, result.stderr


def used(redis7_admin: redis.Redis) -> int:
    return sum(int(redis7_admin.get(HostKeys(HOST).used(n)) or 0) for n in range(len(SLOTS)))


def test_the_agent_runs_its_send_cycle_as_the_sender_user(tmp_path: Path, database_url: str, redis7: RedisServer,
                                                          redis7_admin: redis.Redis,
                                                          submission: SubmissionServer) -> None:
    world = make_world(tmp_path, database_url, redis7.url, submission)
    apply_sender_acl(redis7_admin, HOST, PASSWORD, ["sales"])  # the world's one group: its keys only
    url = sender_url(redis7.url, HOST, PASSWORD)
    redis7_admin.acl_log_reset()
    world.enqueue(3)
    with world.ledger() as ledger:
        ledger.suppress("lead1@rcpt.example", "unsubscribed")  # its reservation is cancelled (cancel.lua)

    run_agent(world, url)

    assert sorted(r.rcpt for r in submission.recorder.received) == ["lead0@rcpt.example", "lead2@rcpt.example"]
    assert {r.peer for r in submission.recorder.received} <= set(SLOTS)  # leased, never the fallback
    assert used(redis7_admin) == 2
    assert redis7_admin.zcard(HostKeys(HOST).leases) == 0  # released
    guard = Guard(redis7_admin)
    assert sum(s.sent for s in guard.status(world.mailboxes)) == 2  # confirmed
    assert redis7_admin.acl_log() == []

    # Redis lost the warm-up keys: the agent re-adds the mailboxes and restores their counters from the ledger
    redis7_admin.delete(*redis7_admin.keys("sendhost:warmup:*"))
    world.enqueue(2, prefix="M", address=lambda n: f"m{n}@rcpt.example")

    run_agent(world, url)

    assert len(submission.recorder.received) == 4
    assert used(redis7_admin) == 4
    assert sum(s.reserved for s in guard.status(world.mailboxes)) == 4  # 2 restored + 2 new
    assert redis7_admin.acl_log() == []


def test_an_address_blamed_by_the_server_is_retired_by_the_sender_user(tmp_path: Path, database_url: str,
                                                                      redis7: RedisServer,
                                                                      redis7_admin: redis.Redis,
                                                                      submission: SubmissionServer) -> None:
    """The sender's ACL user retires an address the submission server blames (spend.lua: INCR only, on its own
    host's used keys) without a command Redis refused, and the row goes out from another address."""
    from ippool import Pool

    world = make_world(tmp_path, database_url, redis7.url, submission, mailboxes=1)
    apply_sender_acl(redis7_admin, HOST, PASSWORD, ["sales"])
    url = sender_url(redis7.url, HOST, PASSWORD)
    blamed = SLOTS[:-1]
    for address in blamed:
        submission.recorder.refuse_peers[address] = f"550 5.7.606 Access denied, banned sending IP [{address}]"
    redis7_admin.acl_log_reset()
    world.enqueue(1)

    run_agent(world, url)

    assert [r.peer for r in submission.recorder.received] == [SLOTS[-1]]
    refused = [peer for peer, _ in submission.recorder.refused]
    assert refused and len(refused) == len(set(refused))  # none leased again after its refusal
    (status,) = Pool(redis7_admin).status(HOST)
    assert all(s.used >= s.budget for s in status.slots if s.private_ip in refused)
    assert redis7_admin.acl_log() == []
