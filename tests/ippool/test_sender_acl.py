"""The sender's Redis ACL user, on a real Redis 7: it leases, renews and releases on its own host, runs the warm-up
guard, and can neither touch another host's keys, write its host's meta hash, delete or read whole keys, nor run
anything else. (tests/sender/test_sender_acl_agent.py runs the whole agent as this user.)

Nor can it write its own host's slot hashes: lease.lua counts a send with INCR on the slot's used key, the only
write it may make there, so a sender can use up its own budget but never reset it."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import redis

from ippool import Pool
from ippool.keys import HOSTS_KEY, HostKeys
from ippool.sender_acl import (
    KEYLESS_COMMANDS,
    LEASE_SCRIPT_COMMANDS,
    MIN_REDIS,
    WARMUP_SCRIPT_COMMANDS,
    apply_sender_acl,
    sender_acl_command,
    sender_grants,
    sender_key,
    sender_password,
    sender_url,
    sender_user,
)
from tests.conftest import run_cli
from tests.support.redis_server import RedisServer

ROOT = Path(__file__).resolve().parents[2]
HOST, OTHER = "sender-1", "sender-2"
PASSWORD = "a-test-password"
CALL = re.compile(r"redis\.p?call\(\s*['\"](\w+)['\"]")


def called(*paths: Path) -> set[str]:
    """The Redis commands the Lua files call."""
    return {name.lower() for path in paths for name in CALL.findall(path.read_text())}


@pytest.fixture
def redis7_url(redis7: RedisServer, redis7_admin: redis.Redis) -> str:
    return redis7.url


def test_the_rule_allows_exactly_what_the_scripts_call() -> None:
    assert called(ROOT / "ippool/lua/lease.lua", ROOT / "ippool/lua/renew.lua") == set(LEASE_SCRIPT_COMMANDS)
    assert called(*(ROOT / "warmup/lua").glob("*.lua")) == set(WARMUP_SCRIPT_COMMANDS)
    assert called(ROOT / "sendhost/lua/_clock.lua") == {"time"} <= set(KEYLESS_COMMANDS)
    grants = sender_grants(HOST)
    lease_keys = {HostKeys(HOST).meta, HostKeys(HOST).leases, HostKeys(HOST).fallbacks,
                  f"{HostKeys(HOST).prefix}:slot:*", f"{HostKeys(HOST).prefix}:slot:*:used"}
    on_lease_keys = {c for g in grants if set(g.patterns) <= lease_keys for c in g.commands}
    assert on_lease_keys == {*LEASE_SCRIPT_COMMANDS, "evalsha", "eval", "zrem"}
    assert sender_acl_command(HOST).startswith(
        "ACL SETUSER sender-sender-1 reset on resetkeys resetchannels -@all +ping +time +script|load "
        "+script|exists +multi +exec \"(~sendhost:{sender-1}:meta ~sendhost:{sender-1}:leases "
        "~sendhost:{sender-1}:fallbacks ~sendhost:{sender-1}:slot:* +evalsha +eval)\" ")
    assert sender_acl_command(HOST).endswith(" >PASSWORD")


def sender_of(redis_url: str, host: str = HOST, password: str = PASSWORD) -> redis.Redis:
    parts = urlsplit(redis_url)
    return redis.Redis(host=parts.hostname or "127.0.0.1", port=parts.port or 6379, username=sender_user(host),
                       password=password, decode_responses=True)


@pytest.fixture
def sender_client(redis7_url: str) -> Iterator[tuple[redis.Redis, redis.Redis]]:
    admin = redis.Redis.from_url(redis7_url, decode_responses=True)
    admin_pool = Pool(admin)
    for host in (HOST, OTHER):
        admin_pool.slots.register_host(host, "10.0.0.1", budget=(5, 5))
        admin_pool.slots.put_address(host, 0, private_ip="10.0.0.10", public_ip="198.51.100.10",
                                     allocation_id=f"eipalloc-{host}")
    assert apply_sender_acl(admin, HOST, PASSWORD) == sender_user(HOST)
    sender = sender_of(redis7_url)
    yield admin, sender
    sender.close()
    admin.close()


def test_a_sender_leases_renews_and_releases(sender_client: tuple[redis.Redis, redis.Redis]) -> None:
    admin, sender = sender_client
    pool = Pool(sender)
    lease = pool.lease(HOST)
    assert (lease.fallback, lease.slot, lease.public_ip) == (False, 0, "198.51.100.10"), lease.reason
    assert lease.renew(60)
    lease.release()
    assert admin.zcard(HostKeys(HOST).leases) == 0
    assert admin.get(HostKeys(HOST).used(0)) == "1"

    admin.script_flush()  # the server forgot the script: the sender's EVAL fallback must be allowed too
    with pool.lease(HOST) as again:
        assert not again.fallback, again.reason
    assert admin.get(HostKeys(HOST).used(0)) == "2"
    admin.hset(HostKeys(HOST).slot(0), "state", "retiring")  # no slot left: the fallback is counted
    assert pool.lease(HOST).reason == "no_slot"
    assert admin.get(HostKeys(HOST).fallbacks) == "1"


@pytest.mark.parametrize("command", [
    ("HSET", HostKeys(OTHER).slot(0), "used", "0"),
    ("ZREM", HostKeys(OTHER).leases, "0:x"),
    ("HSET", HostKeys(HOST).meta, "budget_max", "1000"),
    ("HSET", HostKeys(HOST).meta, "primary_ip", "203.0.113.9"),
    ("HINCRBY", HostKeys(HOST).slot(0), "budget", "100"),
    ("HINCRBY", HostKeys(HOST).meta, "budget_max", "100"),
    ("SET", HostKeys(HOST).fallbacks, "0"),
    ("HSET", HOSTS_KEY, "x", "y"),
    ("SADD", HOSTS_KEY, "x"),
    ("HSET", HostKeys(HOST).stats, "rotations", "0"),
    ("HSET", HostKeys(HOST).claims, "0", "me"),
    ("HGETALL", HostKeys(HOST).slot(0)),
    ("DEL", HostKeys(HOST).slot(0)),
    ("DEL", HostKeys(HOST).meta),
    ("HSET", HostKeys(HOST).slot(0), "state", "active"),
    ("HSET", HostKeys(HOST).slot(0), "used", "0"),
    ("HDEL", HostKeys(HOST).slot(0), "state"),
    ("SET", HostKeys(HOST).used(0), "0"),
    ("DEL", HostKeys(HOST).used(0)),
    ("DECR", HostKeys(HOST).used(0)),
    ("INCRBY", HostKeys(HOST).used(0), "-5"),
    ("INCR", HostKeys(OTHER).used(0)),
    ("HSET", "sendhost:warmup:health:domain:example.com", "2026-11-30", "0"),
    ("SET", "sendhost:anything", "x"),
    ("FLUSHALL",),
    ("CONFIG", "GET", "requirepass"),
    ("KEYS", "*"),
    ("ACL", "LIST"),
], ids=["hset-other-host", "zrem-other-host", "hset-meta-budget", "hset-meta-primary", "hincrby-slot",
        "hincrby-meta", "set-fallbacks",
        "hset-hosts", "sadd-hosts", "hset-stats", "hset-claims", "hgetall", "del-slot", "del-meta",
        "hset-own-slot-state", "hset-own-slot-used", "hdel-own-slot", "set-own-used", "del-own-used",
        "decr-own-used", "incrby-own-used", "incr-other-used",
        "hset-domain-health", "set-elsewhere", "flushall", "config", "keys", "acl"])
def test_a_sender_cannot(sender_client: tuple[redis.Redis, redis.Redis], command: tuple[str, ...]) -> None:
    admin, sender = sender_client
    before = {key: admin.dump(key) for key in admin.keys("*")}
    with pytest.raises(redis.exceptions.NoPermissionError):
        sender.execute_command(*command)
    assert {key: admin.dump(key) for key in admin.keys("*")} == before


def test_a_script_run_by_the_sender_is_held_to_its_acl(sender_client: tuple[redis.Redis, redis.Redis]) -> None:
    """EVAL is allowed (NOSCRIPT fallback), but what the script calls is checked against the sender's user."""
    admin, sender = sender_client
    with pytest.raises(redis.exceptions.ResponseError, match=r"can't (access|run)"):
        sender.eval("return redis.call('DEL', KEYS[1])", 1, HostKeys(HOST).slot(0))
    with pytest.raises(redis.exceptions.ResponseError, match=r"can't (access|run)"):
        sender.eval("return redis.call('HSET', KEYS[1], 'budget_max', 1000)", 1, HostKeys(HOST).meta)
    assert admin.exists(HostKeys(HOST).slot(0))
    assert admin.hget(HostKeys(HOST).meta, "budget_max") == "5"


def test_the_password_is_the_same_on_every_run_and_the_key_file_is_private(tmp_path: Path) -> None:
    path = tmp_path / "state" / "sender-acl.key"
    assert sender_key(path, create=False) is None and not path.exists()
    key = sender_key(path)
    assert key is not None and len(key) == 32
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    assert sender_key(path) == key
    assert sender_password(key, HOST) == sender_password(key, HOST) != sender_password(key, OTHER)
    assert sender_password(key, HOST) != sender_password(b"another key", HOST)


def test_the_sender_url_keeps_the_server_and_drops_the_admin_credentials() -> None:
    assert sender_url("rediss://admin:s3cret@redis.internal:6380/2?ssl_ca_certs=/ca.pem&password=s3cret",
                      HOST, "pw") == "rediss://sender-sender-1:pw@redis.internal:6380/2?ssl_ca_certs=/ca.pem"
    assert sender_url("redis://10.0.0.5:6379", "a@b", "pw") == "redis://sender-a%40b:pw@10.0.0.5:6379"
    assert sender_url("unix:///run/redis.sock?db=3", HOST, "pw") == "unix://sender-sender-1:pw@/run/redis.sock?db=3"


def test_a_redis_without_selectors_is_refused(redis6_url: str) -> None:
    admin = redis.Redis.from_url(redis6_url, decode_responses=True)
    try:
        version = admin.info("server")["redis_version"]
        assert tuple(int(p) for p in version.split(".")[:2]) < MIN_REDIS
        with pytest.raises(ValueError, match=r"ACL selectors need Redis >= 7\.0"):
            apply_sender_acl(admin, HOST, PASSWORD)
        assert sender_user(HOST) not in admin.acl_users()
    finally:
        admin.close()


def test_the_cli_prints_and_applies_the_rule(redis7_url: str) -> None:
    printed = run_cli("pool", "sender-acl", HOST, env={"REDIS_URL": redis7_url})
    assert (printed.returncode, printed.stdout.strip()) == (0, sender_acl_command(HOST)), printed.stderr
    bad = run_cli("pool", "sender-acl", "a{b}", env={"REDIS_URL": redis7_url})
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "bad host name 'a{b}'" in bad.stderr
    no_password = run_cli("pool", "sender-acl", HOST, "--apply", env={"REDIS_URL": redis7_url})
    assert no_password.returncode == 2 and "SENDHOST_SENDER_REDIS_PASSWORD" in no_password.stderr

    applied = run_cli("pool", "sender-acl", HOST, "--apply",
                      env={"REDIS_URL": redis7_url, "SENDHOST_SENDER_REDIS_PASSWORD": PASSWORD})
    assert applied.returncode == 0, applied.stderr
    assert PASSWORD not in applied.stdout + applied.stderr
    sender = sender_of(redis7_url)
    try:
        assert sender.ping()
        with pytest.raises(redis.exceptions.NoPermissionError):
            sender.flushall()
    finally:
        sender.close()
