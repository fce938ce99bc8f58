"""The sender's composition root: one clock under the guard and the pool, the hot-path role for the agent's Redis."""

from __future__ import annotations

from datetime import UTC, date, datetime
from pathlib import Path

import redis

from sender.assembly import build_sender, hot_path_client
from sendhost import redis_conn

AT = datetime(2021, 3, 1, 12, 0, tzinfo=UTC).timestamp()  # far from the real time, so Redis TIME would show


def test_the_guard_and_the_pool_read_the_one_clock(redis_client: redis.Redis) -> None:
    at = [AT]
    sending = build_sender(redis_client, clock=lambda: at[0])
    sending.guard.add_mailbox("a@x.com", start=date(2021, 2, 1), min_gap_s=0, jitter_s=(0, 0))
    decision = sending.guard.reserve("a@x.com")
    assert decision.reserved and decision.reservation is not None
    assert (decision.reservation.day, decision.reservation.at_ms) == ("2021-03-01", int(AT * 1000))

    sending.pool.register_host("h1", "10.0.0.1", (8, 8))
    sending.pool.put_address("h1", 0, private_ip="10.0.1.1", public_ip="203.0.113.1")
    at[0] = AT + 5
    lease = sending.pool.lease("h1", ttl_s=30)
    assert not lease.fallback
    [(_member, expiry_ms)] = redis_client.zrange("sendhost:{h1}:leases", 0, -1, withscores=True)
    assert expiry_ms == int((AT + 5) * 1000) + 30_000
    lease.release()


def test_the_agents_client_has_the_hot_path_role(redis_url: str, tmp_path: Path) -> None:
    client = hot_path_client(redis_url, tmp_path)
    try:
        kwargs = client.connection_pool.connection_kwargs
        assert kwargs["socket_timeout"] == redis_conn.HOT_PATH.socket_timeout_s
        assert kwargs["protocol"] == 2  # lean: no HELLO on a reconnect
        retry = kwargs["retry"]
        assert retry.get_retries() == redis_conn.HOT_PATH.retries
        assert client.ping()
    finally:
        client.close()
