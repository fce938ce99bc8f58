"""`sendhost pool status`, run as a user runs it, against a real Redis."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import redis

from ippool import Pool
from tests.conftest import run_cli, run_cli_process
from tests.support.cli import lines_wider_than, run_cli_on_terminal, words_cut
from tests.support.net import free_port
from tests.support.redis_server import private_redis_server

TABLE = """\
sender-1 (primary 10.0.0.10, budget 8..15)
┏━━━━━━┳━━━━━━━━━━┳━━━━━━━━━━━━┳━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━┳━━━━━━━━━━━━━┳━━━━━━━━━━━━━┳━━━━━┓
┃ slot ┃ state    ┃ private ip ┃ public ip   ┃ allocation    ┃ used/budget ┃ live leases ┃ gen ┃
┡━━━━━━╇━━━━━━━━━━╇━━━━━━━━━━━━╇━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━╇━━━━━━━━━━━━━╇━━━━━┩
│ 0    │ active   │ 10.0.1.1   │ 203.0.113.1 │ eipalloc-0001 │ 2/{b0:<9} │ 2           │ 1   │
│ 1    │ active   │ 10.0.1.2   │ 203.0.113.2 │ eipalloc-0002 │ 1/{b1:<9} │ 1           │ 1   │
│ 2    │ retiring │ 10.0.1.3   │ 203.0.113.3 │ eipalloc-0003 │ 1/{b2:<9} │ 1           │ 1   │
└──────┴──────────┴────────────┴─────────────┴───────────────┴─────────────┴─────────────┴─────┘
2 of 3 slots leasable
parked: 0; denylist: 0; last rotation: never
"""


def populate(redis_url: str) -> list[int]:
    """sender-1 with three addresses, four live leases, slot 2 retired by hand; returns the budgets drawn."""
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    pool = Pool(client, rng=random.Random(7))
    pool.register_host("sender-1", "10.0.0.10")
    budgets = [pool.put_address("sender-1", i, private_ip=f"10.0.1.{i + 1}", public_ip=f"203.0.113.{i + 1}",
                                allocation_id=f"eipalloc-{i + 1:04d}").budget for i in range(3)]
    for _ in range(4):
        pool.lease("sender-1", ttl_s=300)
    pool.slots.retire("sender-1", 2)
    client.close()
    return budgets


def test_status_table(redis_url: str) -> None:
    budgets = populate(redis_url)
    result = run_cli("--redis-url", redis_url, "pool", "status", "sender-1")
    assert result.returncode == 0, result.stderr
    lines = [line.rstrip() for line in result.stdout.splitlines()]
    expected = TABLE.format(b0=budgets[0], b1=budgets[1], b2=budgets[2]).splitlines()
    assert lines == expected


@pytest.mark.parametrize("columns", [100, 120])
def test_status_on_a_terminal_100_or_120_wide_breaks_no_id_or_address(redis_url: str, columns: int) -> None:
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    pool = Pool(client, rng=random.Random(7))
    pool.register_host("sender-1", "10.213.168.10")
    for slot in range(4):  # AWS's own lengths: 17 hex digits to an allocation id
        pool.put_address("sender-1", slot, private_ip=f"10.213.168.{11 + slot}", public_ip=f"198.51.100.{201 + slot}",
                         allocation_id=f"eipalloc-0c26259e112a3c44{slot}")
    pool.slots.retire("sender-1", 3)
    client.close()

    piped = run_cli("--redis-url", redis_url, "pool", "status", "sender-1")
    shown = run_cli_on_terminal("--redis-url", redis_url, "pool", "status", "sender-1", columns=columns)
    assert shown.returncode == 0, shown.stderr
    assert "eipalloc-0c26259e112a3c443" in piped.stdout, piped.stdout
    assert words_cut(shown.stdout, piped.stdout) == []
    assert lines_wider_than(shown.stdout, columns) == []


def test_status_json_for_one_host(redis_url: str) -> None:
    budgets = populate(redis_url)
    result = run_cli("pool", "status", "sender-1", "--format", "json", env={"REDIS_URL": redis_url})
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert (data["host"], data["primary_ip"]) == ("sender-1", "10.0.0.10")
    assert data["slots"] == [
        {"slot": i, "private_ip": f"10.0.1.{i + 1}", "public_ip": f"203.0.113.{i + 1}",
         "allocation_id": f"eipalloc-{i + 1:04d}", "state": state, "used": used, "budget": budgets[i],
         "live_leases": used, "generation": 1}
        for i, (state, used) in enumerate([("active", 2), ("active", 1), ("retiring", 1)])
    ]


def test_status_json_of_every_host_is_a_list(redis_url: str) -> None:
    populate(redis_url)
    result = run_cli("--format", "json", "pool", "status", env={"REDIS_URL": redis_url})
    assert result.returncode == 0, result.stderr
    assert [host["host"] for host in json.loads(result.stdout)] == ["sender-1"]


def test_status_with_no_host_registered(redis_url: str) -> None:
    result = run_cli("--redis-url", redis_url, "pool", "status")
    assert (result.returncode, result.stdout) == (
        0, "no hosts registered in Redis; `sendhost pool create HOST` gives an inventory host its Elastic IPs and "
           "registers it\n")


def test_status_with_inventory_hosts_none_registered_says_what_registers_them(redis_url: str,
                                                                             example_inventory: Path) -> None:
    result = run_cli("--inventory", str(example_inventory), "--redis-url", redis_url, "pool", "status")
    assert (result.returncode, result.stdout) == (
        0, f"no hosts registered in Redis; {example_inventory} has sender-1, sender-2: `sendhost pool create HOST` "
           "gives each its Elastic IPs and registers it (`sendhost pool reconcile --fix` registers one whose "
           "addresses AWS has already)\n")


def test_unknown_host_exits_2_naming_it(redis_url: str) -> None:
    populate(redis_url)
    result = run_cli("--redis-url", redis_url, "pool", "status", "sender-9")
    assert result.returncode == 2
    assert result.stderr == "error: host 'sender-9' is not registered in Redis (registered: sender-1)\n"


def test_malformed_redis_url_exits_2_naming_it() -> None:
    result = run_cli("pool", "status", env={"REDIS_URL": "redis://localhost:notaport/0"})
    assert result.returncode == 2
    assert result.stderr.startswith("error: redis_url from env REDIS_URL: malformed Redis URL "
                                    "'redis://localhost:notaport/0'")
    assert "Traceback" not in result.stderr and result.stdout == ""


@pytest.mark.service
def test_a_redis_failing_midway_through_status_exits_1_in_one_line() -> None:
    # A real server that answers the slot reads but refuses the denylist's prune (as a flaky or locked-down one
    # might): the failure comes after the slots were read, where it once surfaced as an internal error.
    with private_redis_server("sendhost-flaky-", extra=("--rename-command", "ZREMRANGEBYSCORE", "")) as server:
        populate(server.url)
        result = run_cli("--redis-url", server.url, "pool", "status")
    assert result.returncode == 1, result.stderr
    assert result.stderr.startswith(f"error: cannot read the pool status: Redis at {server.url} said ResponseError")
    assert len(result.stderr.splitlines()) == 1 and "internal error" not in result.stderr
    assert result.stdout == ""


@pytest.mark.service
def test_unreachable_redis_exits_1_saying_so() -> None:
    url = f"redis://127.0.0.1:{free_port()}/0"
    result = run_cli_process("--redis-url", url, "pool", "status")
    assert result.returncode == 1
    assert result.stderr.startswith("error: cannot list hosts: Redis said ConnectionError")
    assert "Traceback" not in result.stderr
