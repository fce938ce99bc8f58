"""Redis going away under real senders: leases fall back within the socket timeout, then resume."""

from __future__ import annotations

import json
import multiprocessing
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from redis.connection import Connection

from ippool import Pool
from ippool.lease import REDIS_ERROR
from tests.scenarios import workers
from tests.support.ippool_backends import register
from tests.support.redis_server import RedisServer, private_redis_server, redis_server_at_least

SOCKET_TIMEOUT_S = 0.2
# One retry without backoff (a stale connection after a restart): at most two timeouts, plus scheduling slack on a
# loaded 2-core machine.
FALLBACK_BOUND_S = 2 * SOCKET_TIMEOUT_S + 0.6
CTX = multiprocessing.get_context("fork")


@pytest.fixture(scope="module")
def own_redis() -> Iterator[RedisServer]:
    """A private redis-server these tests may stop, pause and restart (never the session's shared one): a Redis 7
    where there is one, so the hot path is the FCALL production runs."""
    with private_redis_server("sendhost-outage-", executable=redis_server_at_least((7, 0))) as server:
        yield server


def registered_pool(url: str) -> Pool:
    """A Pool on `url` with the hot-path timeout under test, and sender-1 registered (on an empty Redis too)."""
    pool = Pool.from_url(url, socket_timeout=SOCKET_TIMEOUT_S)
    register(pool, slots=2, budget=(1000, 1000))  # budgets large enough not to run out in this test
    return pool


@pytest.mark.slow
def test_senders_fall_back_while_redis_is_stopped_and_resume_when_it_returns(own_redis: RedisServer,
                                                                             tmp_path: Path) -> None:
    registered_pool(own_redis.url).close()
    outs = [tmp_path / f"sender-{i}.json" for i in range(4)]
    procs = [CTX.Process(target=workers.lease_for, args=(own_redis.url, "sender-1", 4.0, str(out), SOCKET_TIMEOUT_S))
             for out in outs]
    for proc in procs:
        proc.start()
    time.sleep(1.0)
    stop_called_at = time.time()
    own_redis.stop()
    stopped_at = time.time()  # the server has exited
    time.sleep(1.0)
    start_called_at = time.time()
    own_redis.start()  # empty, as after a crash without persistence: reconcile re-registers the pool
    registered_pool(own_redis.url).close()
    restarted_at = time.time()
    for proc in procs:
        proc.join(timeout=30)
    assert [proc.exitcode for proc in procs] == [0] * 4
    reports = [json.loads(out.read_text()) for out in outs]
    assert [r["errors"] for r in reports] == [[]] * 4
    records = [rec for r in reports for rec in r["records"]]
    before = [rec for rec in records if rec[0] < stop_called_at]
    during = [rec for rec in records if stopped_at < rec[0] < start_called_at]
    after = [rec for rec in records if rec[0] > restarted_at + 0.5]
    assert before and all(not rec[1] for rec in before)
    assert during and all(rec[1] and rec[3] == REDIS_ERROR for rec in during)
    assert after and all(not rec[1] for rec in after)
    slowest = max(rec[2] for rec in records)
    assert slowest < FALLBACK_BOUND_S, f"a lease took {slowest:.2f}s with Redis down"


def test_a_hung_redis_costs_a_lease_at_most_the_socket_timeout(own_redis: RedisServer) -> None:
    pool = registered_pool(own_redis.url)
    try:
        assert pool.lease("sender-1").fallback is False
        assert own_redis.process is not None
        own_redis.process.send_signal(signal.SIGSTOP)  # accepts connections (kernel backlog), never answers
        try:
            started = time.monotonic()
            lease = pool.lease("sender-1")
            elapsed = time.monotonic() - started
        finally:
            own_redis.process.send_signal(signal.SIGCONT)
        assert (lease.fallback, lease.reason, lease.source_ip) == (True, REDIS_ERROR, "10.0.0.10")
        assert elapsed < FALLBACK_BOUND_S
        assert pool.fallbacks.totals[REDIS_ERROR] == 1
        assert pool.lease("sender-1").fallback is False
    finally:
        pool.close()


def test_one_round_trip_per_lease_and_per_release(own_redis: RedisServer) -> None:
    """MONITOR on the server lists each command a client sends; commands run inside a script are marked lua."""
    pool = registered_pool(own_redis.url)
    watcher = own_redis.client()
    try:
        pool.lease("sender-1").release()  # the first call checks the library's version
        with watcher.monitor() as monitor:
            for _ in range(20):
                pool.lease("sender-1").release()
            pool.client.echo("end-of-test")
            sent = []
            while True:
                command = monitor.next_command()
                if command["command"] == "ECHO end-of-test":
                    break
                if command["client_type"] != "lua":
                    sent.append(command["command"].split()[0])
        # lease: one function (one script on a Redis without Functions); release: one plain command
        runner = "FCALL" if redis_server_at_least((7, 0)) else "EVALSHA"
        assert sent == [runner, "ZREM"] * 20
    finally:
        watcher.close()
        pool.close()


def test_a_lease_after_redis_restarted_empty_costs_three_round_trips(own_redis: RedisServer,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The cause of a 2.26 s lease against the 1 s bound: the socket timeout bounds each round trip, and a lease that
    reconnects after a restart made eight (the stale connection, redis-py's handshake of HELLO, CLIENT
    MAINT_NOTIFICATIONS and CLIENT SETINFO twice, then EVALSHA, SCRIPT LOAD, EVALSHA), each slow on a loaded machine.
    The hot path now makes at most three: the stale read and FCALL (the admin's pool reloaded the library), or, on a
    Redis without Functions, the stale read, EVALSHA (NOSCRIPT), EVAL."""
    pool = registered_pool(own_redis.url)
    try:
        assert pool.lease("sender-1").fallback is False  # a pooled connection, the scripts loaded
        own_redis.stop()
        own_redis.start()  # empty: no library, no script, no host
        registered_pool(own_redis.url).close()  # the admin: reconcile registers the host (and loads the library)
        reads: list[str] = []
        original = Connection.read_response

        def counted(self: Connection, *args: Any, **kwargs: Any) -> Any:
            reads.append(type(self).__name__)
            return original(self, *args, **kwargs)

        monkeypatch.setattr(Connection, "read_response", counted)
        lease = pool.lease("sender-1")
        monkeypatch.undo()
        assert lease.fallback is False
        assert len(reads) <= 3, reads
    finally:
        pool.close()


def test_malformed_url_is_a_value_error_naming_it_at_construction() -> None:
    with pytest.raises(ValueError, match=r"malformed Redis URL 'redis://host:port/x'"):
        Pool.from_url("redis://host:port/x")
