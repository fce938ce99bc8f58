"""`sendhost.redis_conn.cluster_url`: how a Redis URL says it names a Redis Cluster (`?cluster=yes`), and what
redis-py is given instead (the URL without it, every other parameter kept)."""

from __future__ import annotations

import pytest

from sendhost.redis_conn import cluster_url


@pytest.mark.parametrize(("url", "expected"), [
    ("redis://h:6379/0", (False, "redis://h:6379/0")),
    ("redis://h:6379/0?cluster=yes", (True, "redis://h:6379/0")),
    ("rediss://u:p%23w@h:6380/0?ssl_ca_certs=/etc/ca.pem&cluster=true", (True, "rediss://u:p%23w@h:6380/0?ssl_ca_certs=%2Fetc%2Fca.pem")),
    ("redis://h/0?Cluster=NO", (False, "redis://h/0")),
])
def test_cluster_yes_opens_a_cluster_and_is_removed_from_the_url(url: str, expected: tuple[bool, str]) -> None:
    assert cluster_url(url) == expected


def test_another_value_is_refused_naming_the_fix() -> None:
    with pytest.raises(ValueError, match=r"cluster='maybe': write cluster=yes"):
        cluster_url("redis://h/0?cluster=maybe")
