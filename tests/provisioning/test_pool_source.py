"""Provisioning reads slot addresses from the IP pool, the one source: a host without a pool is an error, never a
guess from the inventory's private_ips."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis

from ippool.errors import PoolOperationFailed
from ippool.pool import Pool
from provisioning.errors import ProvisionConfigError
from provisioning.pool_source import pool_slot_source
from tests.support.net import free_port
from toolkit.cli.provision import _plans
from toolkit.inventory import load_inventory


@pytest.fixture
def inventory_path(tmp_path: Path, example_inventory: Path) -> Path:
    key = tmp_path / "id_test"
    key.write_text("not a real key: only its existence is checked before ansible runs\n")
    path = tmp_path / "inventory.yml"
    path.write_text(example_inventory.read_text().replace("~/.ssh/sendhost.pem", str(key)))
    return path


def test_a_host_gets_its_pools_addresses_not_the_inventorys(inventory_path: Path,
                                                              redis_client: redis.Redis) -> None:
    pool = Pool(redis_client)
    for host, base in (("sender-1", 30), ("sender-2", 40)):
        pool.register_host(host, "10.0.1.10")
        pool.put_address(host, 0, private_ip=f"10.0.1.{base + 1}", public_ip=f"198.18.0.{base + 1}",
                         allocation_id=f"eipalloc-{base + 1}")
    pool.put_address("sender-1", 1, private_ip="10.0.1.32", public_ip="198.18.0.32", allocation_id="eipalloc-32")

    plans = {p.name: p for p in _plans(load_inventory(inventory_path), None, pool_slot_source(pool))}

    assert plans["sender-1"].slot_addresses == ("10.0.1.31", "10.0.1.32")  # the pool's, not the inventory's .11/.12
    assert plans["sender-1"].elastic_ips == ("198.18.0.31", "198.18.0.32")
    assert plans["sender-2"].slot_addresses == ("10.0.1.41",)


def test_a_host_without_a_pool_is_refused_though_the_inventory_lists_private_ips(
        inventory_path: Path, redis_client: redis.Redis) -> None:
    inventory = load_inventory(inventory_path)
    assert inventory.host("sender-1").pool.private_ips == ("10.0.1.11", "10.0.1.12")  # they only feed pool create
    with pytest.raises(ProvisionConfigError, match=r"^sender-1: no IP pool for this host in Redis, .*"
                                                   r"run `sendhost pool create sender-1` first$"):
        _plans(inventory, None, pool_slot_source(Pool(redis_client)))


@pytest.mark.service
def test_an_unreachable_pool_is_an_error_not_an_empty_pool(inventory_path: Path) -> None:
    # Falling back to the inventory here could unbind addresses the pool is sending from.
    dead = redis.Redis(port=free_port(), socket_timeout=0.2, socket_connect_timeout=0.2)
    with pytest.raises(PoolOperationFailed):
        _plans(load_inventory(inventory_path), None, pool_slot_source(Pool(dead)))
    dead.close()
