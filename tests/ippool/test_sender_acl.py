"""The sender's Redis ACL user, on a real Redis: it leases, renews and releases on its own host, and can neither
touch another host's keys, delete or read whole keys, nor run anything else.

It can still HSET its own host's slot hashes: lease.lua writes a slot's used count and state with HSET, and Redis
holds a script's commands to the caller's ACL (there is no field-level ACL). An address it writes there is refused
by the pool before AWS is touched (tests/ippool/test_ownership.py)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import redis

from ippool import Pool
from ippool.keys import HostKeys
from ippool.sender_acl import (
    CLIENT_COMMANDS,
    SCRIPT_COMMANDS,
    apply_sender_acl,
    sender_acl_command,
    sender_user,
)
from tests.conftest import run_cli

ROOT = Path(__file__).resolve().parents[2]
HOST, OTHER = "sender-1", "sender-2"
PASSWORD = "a-test-password"


def test_the_rule_allows_exactly_what_the_lease_scripts_call() -> None:
    sources = [ROOT / "ippool/lua/lease.lua", ROOT / "ippool/lua/renew.lua", ROOT / "sendhost/lua/_clock.lua"]
    called = {name.lower() for path in sources
              for name in re.findall(r"redis\.p?call\(\s*['\"](\w+)['\"]", path.read_text())}
    assert called == set(SCRIPT_COMMANDS)
    assert sender_acl_command(HOST) == (
        "ACL SETUSER sender-sender-1 reset on resetkeys ~sendhost:{sender-1}:meta ~sendhost:{sender-1}:leases "
        "~sendhost:{sender-1}:slot:* resetchannels -@all "
        + " ".join(f"+{c}" for c in (*CLIENT_COMMANDS, *SCRIPT_COMMANDS)) + " >PASSWORD")


@pytest.fixture
def sender_client(redis_url: str) -> Iterator[tuple[redis.Redis, redis.Redis]]:
    admin = redis.Redis.from_url(redis_url, decode_responses=True)
    admin_pool = Pool(admin)
    for host in (HOST, OTHER):
        admin_pool.slots.register_host(host, "10.0.0.1", budget=(5, 5))
        admin_pool.slots.put_address(host, 0, private_ip="10.0.0.10", public_ip="198.51.100.10",
                                     allocation_id=f"eipalloc-{host}")
    assert apply_sender_acl(admin, HOST, PASSWORD) == sender_user(HOST)
    parts = urlsplit(redis_url)
    sender = redis.Redis(host=parts.hostname or "127.0.0.1", port=parts.port or 6379, username=sender_user(HOST),
                         password=PASSWORD, decode_responses=True)
    yield admin, sender
    sender.close()
    admin.execute_command("ACL", "DELUSER", sender_user(HOST))
    admin.close()


def test_a_sender_leases_renews_and_releases(sender_client: tuple[redis.Redis, redis.Redis]) -> None:
    admin, sender = sender_client
    pool = Pool(sender)
    lease = pool.lease(HOST)
    assert (lease.fallback, lease.slot, lease.public_ip) == (False, 0, "198.51.100.10"), lease.reason
    assert lease.renew(60)
    lease.release()
    assert admin.zcard(HostKeys(HOST).leases) == 0
    assert admin.hget(HostKeys(HOST).slot(0), "used") == "1"

    admin.script_flush()  # the server forgot the script: the sender's EVAL fallback must be allowed too
    with pool.lease(HOST) as again:
        assert not again.fallback, again.reason
    assert admin.hget(HostKeys(HOST).slot(0), "used") == "2"


@pytest.mark.parametrize("command", [
    ("HSET", HostKeys(OTHER).slot(0), "used", "0"),
    ("ZREM", HostKeys(OTHER).leases, "0:x"),
    ("HGETALL", HostKeys(HOST).slot(0)),
    ("DEL", HostKeys(HOST).slot(0)),
    ("FLUSHALL",),
    ("CONFIG", "GET", "requirepass"),
    ("KEYS", "*"),
], ids=["hset-other-host", "zrem-other-host", "hgetall", "del", "flushall", "config",
        "keys"])
def test_a_sender_cannot(sender_client: tuple[redis.Redis, redis.Redis], command: tuple[str, ...]) -> None:
    admin, sender = sender_client
    before = admin.hgetall(HostKeys(HOST).slot(0))
    with pytest.raises(redis.exceptions.NoPermissionError):
        sender.execute_command(*command)
    assert admin.hgetall(HostKeys(HOST).slot(0)) == before


def test_a_script_run_by_the_sender_is_held_to_its_acl(sender_client: tuple[redis.Redis, redis.Redis]) -> None:
    """EVAL is allowed (NOSCRIPT fallback), but what the script calls is checked against the sender's user."""
    admin, sender = sender_client
    with pytest.raises(redis.exceptions.ResponseError, match="can't run this command"):
        sender.eval("return redis.call('DEL', KEYS[1])", 1, HostKeys(HOST).slot(0))
    assert admin.exists(HostKeys(HOST).slot(0))


def test_the_cli_prints_and_applies_the_rule(redis_url: str) -> None:
    printed = run_cli("pool", "sender-acl", HOST, env={"REDIS_URL": redis_url})
    assert (printed.returncode, printed.stdout.strip()) == (0, sender_acl_command(HOST)), printed.stderr
    bad = run_cli("pool", "sender-acl", "a{b}", env={"REDIS_URL": redis_url})
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "bad host name 'a{b}'" in bad.stderr
    no_password = run_cli("pool", "sender-acl", HOST, "--apply", env={"REDIS_URL": redis_url})
    assert no_password.returncode == 2 and "SENDHOST_SENDER_REDIS_PASSWORD" in no_password.stderr

    applied = run_cli("pool", "sender-acl", HOST, "--apply",
                      env={"REDIS_URL": redis_url, "SENDHOST_SENDER_REDIS_PASSWORD": PASSWORD})
    assert applied.returncode == 0, applied.stderr
    assert PASSWORD not in applied.stdout + applied.stderr
    admin = redis.Redis.from_url(redis_url, decode_responses=True)
    try:
        parts = urlsplit(redis_url)
        sender = redis.Redis(host=parts.hostname or "127.0.0.1", port=parts.port or 6379,
                             username=sender_user(HOST), password=PASSWORD)
        assert sender.ping()
        with pytest.raises(redis.exceptions.NoPermissionError):
            sender.flushall()
        sender.close()
    finally:
        admin.execute_command("ACL", "DELUSER", sender_user(HOST))
        admin.close()
