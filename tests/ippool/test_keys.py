"""Key names share one hash tag per host."""

from __future__ import annotations

import pytest
from redis.crc import key_slot

from ippool.keys import HostKeys


def test_every_key_of_a_host_hashes_to_one_cluster_slot() -> None:
    for host in ("sender-1", "sender-2", "a.b.example"):
        keys = HostKeys(host)
        slots = {key_slot(key.encode()) for key in keys.with_slots(12)}
        assert len(slots) == 1, host
        assert keys.meta == f"sendhost:{{{host}}}:meta"
        assert keys.slot(3) == f"sendhost:{{{host}}}:slot:3"


def test_hosts_land_on_different_cluster_slots() -> None:
    assert len({key_slot(HostKeys(f"sender-{i}").leases.encode()) for i in range(20)}) > 1


@pytest.mark.parametrize("host", ["", "a{b", "a}b", "a b"])
def test_a_host_name_that_cannot_be_a_hash_tag_is_refused(host: str) -> None:
    with pytest.raises(ValueError, match="bad host name"):
        HostKeys(host)
