"""sendhost through a real PgBouncer in transaction pooling mode (default_pool_size 5) in front of a PostgreSQL of
its own whose max_connections is 25: migrate, the agent, and a fleet of agent processes with the web service, the
server never seeing more connections than the pool (docs/pgbouncer.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx
import psycopg
import pytest

from sender import Ledger
from sender.ledger import connection as db
from sender.ledger.migrate import latest_version
from sender.ledger.queries import migrations
from sender.sending.agent import CHECKPOINTS
from tests.conftest import REPO_ROOT
from tests.sender.ledger.test_schema import _at_version, catalogue
from tests.sender.sending.test_crash import EXPECTED as CRASH_EXPECTED
from tests.sender.web_server import web_server
from tests.sender.world import World, make_world
from tests.support.cli import run_cli_process
from tests.support.pgbouncer import Bouncer, bouncer_in_front_of_small_postgres
from tests.support.submission import SubmissionServer

POOL_SIZE = 5
MAX_CONNECTIONS = 25


@pytest.fixture(scope="module")
def bouncer() -> Iterator[Bouncer]:
    with bouncer_in_front_of_small_postgres(pool_size=POOL_SIZE, max_connections=MAX_CONNECTIONS) as started:
        yield started


@pytest.fixture
def database(bouncer: Bouncer) -> Iterator[str]:
    """A fresh database on the small server; reach it through `bouncer.url(database)`."""
    with bouncer.fresh_database() as name:
        yield name


class ServerConnections:
    """Samples pg_stat_activity on the server itself (not through PgBouncer) while a block runs: the most client
    backends it saw on `database` at once."""

    def __init__(self, bouncer: Bouncer, database: str) -> None:
        self._url = bouncer.server_url()
        self._database = database
        self._stop = threading.Event()
        self.most = 0
        self.samples = 0
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        with psycopg.connect(self._url, autocommit=True) as conn:
            while not self._stop.is_set():
                (count,) = conn.execute(  # type: ignore[misc]
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND backend_type = 'client backend'",
                    (self._database,)).fetchone()
                self.most = max(self.most, int(count))
                self.samples += 1
                self._stop.wait(0.01)

    def __enter__(self) -> ServerConnections:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)


def test_sender_migrate_through_pgbouncer_from_four_processes_on_an_older_ledger(bouncer: Bouncer,
                                                                                database: str) -> None:
    """Each migration transaction takes the lock itself and re-reads the version: four `sender migrate` at once,
    through transaction pooling, bring a version-5 ledger to the catalogue of a fresh one, each version once."""
    _at_version(bouncer.server_url(database), 5)
    url = bouncer.url(database)
    args = [sys.executable, "-m", "toolkit", "--format", "json", "sender", "--database-url", url, "migrate"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("SENDHOST_")} | {"PYTHONPATH": str(REPO_ROOT)}
    procs = [subprocess.Popen(args, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(4)]
    outputs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0, 0], outputs
    results = [json.loads(out) for out, _err in outputs]
    assert {r["after"] for r in results} == {latest_version()}
    applied = Counter(name for r in results for name in r["applied"])
    later = [name for version, name, _text in migrations() if version > 5]
    assert set(applied) == set(later)
    # a version's last file runs once; only a first part (6_0, IF NOT EXISTS) may run again before 6 is recorded
    assert all(count == 1 for name, count in applied.items() if not name.startswith("6_0")), applied
    with psycopg.connect(bouncer.server_url(database)) as conn:
        versions = [v for (v,) in conn.execute("SELECT version FROM sender_schema_versions ORDER BY version")]
        # no lock outlived its transaction on the server connections PgBouncer keeps for the next client
        held = conn.execute("SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid) "
                            "WHERE l.locktype = 'advisory' AND a.datname = %s", (database,)).fetchone()
    assert versions == list(range(1, latest_version() + 1))
    assert held == (0,)
    with bouncer.fresh_database() as fresh:
        again = run_cli_process("sender", "--database-url", bouncer.url(fresh), "migrate")
        assert again.returncode == 0, again.stderr
        assert catalogue(bouncer.server_url(database)) == catalogue(bouncer.server_url(fresh))


def _world(tmp_path: Path, bouncer: Bouncer, database: str, redis_url: str, submission: SubmissionServer) -> World:
    with Ledger.from_url(bouncer.url(database)) as ledger:
        ledger.migrate()
    return make_world(tmp_path, bouncer.url(database), redis_url, submission)


def _assert_each_row_sent_once(world: World, rows: int) -> None:
    received = world.server.recorder.received
    per_message = Counter(r.message_id for r in received)
    assert len(per_message) == rows and max(per_message.values()) == 1
    assert sorted(r.rcpt for r in received) == sorted(f"lead{n}@rcpt.example" for n in range(rows))
    with world.ledger() as ledger:
        counts = ledger.counts()
    assert counts["sent"] == rows and counts["unconfirmed"] == counts["sending"] == 0, counts


def test_the_agent_sends_through_pgbouncer_in_transaction_mode(tmp_path: Path, bouncer: Bouncer, database: str,
                                                              redis_url: str, submission: SubmissionServer) -> None:
    """Two workers, 40 rows: each claim, start and record is the same few statements many times over, which a
    server-side prepared statement would trip on (`_pg3_0` already exists on another client's server connection)."""
    world = _world(tmp_path, bouncer, database, redis_url, submission)
    world.enqueue(40)
    agent, factory = world.agent()
    with ServerConnections(bouncer, database) as seen:
        reports = agent.run(factory, 2, once=True)
    assert Counter(r.kind for r in reports) == {"sent": 40}
    _assert_each_row_sent_once(world, 40)
    assert 0 < seen.most <= POOL_SIZE


AGENTS = 24
LEADS = 60  # two steps each: step 2 is due once step 1 is sent (from the same mailbox)


@pytest.mark.slow
def test_a_fleet_through_pgbouncer_never_opens_more_server_connections_than_the_pool(
        tmp_path: Path, bouncer: Bouncer, database: str, redis_url: str, submission: SubmissionServer) -> None:
    """24 agent processes x 2 workers and the web service (its /healthz and /metrics/ asked all along) hold about
    24 x 2 + 8 client connections to PgBouncer; PostgreSQL admits 25 and sees at most the pool's 5. Every (lead,
    step) is delivered exactly once, step 2 after step 1."""
    world = _world(tmp_path, bouncer, database, redis_url, submission)
    world.enqueue(LEADS)
    world.enqueue(LEADS, step=2)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SENDHOST_") and k != "REDIS_URL"}
    env["PYTHONPATH"] = str(REPO_ROOT)
    args = [sys.executable, "-m", "toolkit", *world.cli_args("run", "--host", "sender-1", "--workers", "2", "--once",
                                                             "--smtp-timeout", "10")]
    scrapes: Counter[int | str] = Counter()  # status codes, or the error that got no answer
    with ServerConnections(bouncer, database) as seen, web_server(tmp_path / "web", world.database_url) as web:
        stop = threading.Event()

        def ask() -> None:
            while not stop.is_set():
                for address in (f"{web.base}/healthz", f"{web.metrics_base}/metrics/"):
                    try:
                        scrapes[httpx.get(address, timeout=30).status_code] += 1
                    except httpx.HTTPError as exc:
                        scrapes[f"{address}: {exc!r}"] += 1

        asking = threading.Thread(target=ask, daemon=True)
        asking.start()
        procs = [subprocess.Popen(args, cwd=world.tmp, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True) for _ in range(AGENTS)]
        outputs = [p.communicate(timeout=600) for p in procs]
        stop.set()
        asking.join(60)
    assert [p.returncode for p in procs] == [0] * AGENTS, [err for _out, err in outputs if err][:3]
    received = Counter(r.message_id for r in world.server.recorder.received)
    assert len(received) == 2 * LEADS and max(received.values()) == 1
    arrival = {r.message_id: n for n, r in enumerate(world.server.recorder.received)}
    with world.ledger() as ledger:
        for lead in range(LEADS):
            first, second = (ledger.show(f"L{lead}", step) for step in (1, 2))
            assert first is not None and second is not None
            assert first.row["status"] == second.row["status"] == "sent", (first.events, second.events)
            assert arrival[first.row["message_id"]] < arrival[second.row["message_id"]]
            assert first.row["mailbox"] == second.row["mailbox"]
    assert set(scrapes) == {200} and scrapes[200] >= 2, scrapes
    assert seen.samples > 10 and 0 < seen.most <= POOL_SIZE, (seen.most, seen.samples)
    assert "prepared statement" not in bouncer.log()


@pytest.mark.slow
@pytest.mark.parametrize("step", CHECKPOINTS)
def test_sigkill_after_a_step_through_pgbouncer(tmp_path: Path, bouncer: Bouncer, database: str, redis_url: str,
                                                submission: SubmissionServer, step: str) -> None:
    """An agent killed mid-send through the pool leaves what test_crash says it leaves directly: its server
    connection goes back to the pool with nothing of its half-done call, and the next agent, through the same pool,
    finishes the job: nothing delivered twice, a row killed after its attempt started unconfirmed."""
    world = _world(tmp_path, bouncer, database, redis_url, submission)
    world.enqueue(1)
    child = subprocess.run([sys.executable, "-m", "tests.sender.agent_child", str(world.inventory),
                            world.database_url, world.redis_url, step], cwd=REPO_ROOT, capture_output=True,
                           text=True, timeout=120, check=False)
    assert child.returncode == -9, child.stderr
    with world.ledger() as ledger:
        ledger.sweep(0)
    agent, factory = world.agent()
    agent.run(factory, 1, once=True, stop=threading.Event())
    with world.ledger() as ledger:
        shown = ledger.show("L0", 1)
    assert shown is not None
    status, deliveries = CRASH_EXPECTED[step]
    assert shown.row["status"] == status, shown.events
    assert len(world.server.recorder.received) == deliveries
    if deliveries:
        assert world.server.recorder.received[0].message_id == shown.row["message_id"]


def test_the_web_service_holds_at_most_its_pool_size(tmp_path: Path, bouncer: Bouncer, database: str) -> None:
    """`sender web --pool-size 2`, asked /healthz by 24 clients at once: the server never sees more than 2 of its
    connections (application_name sendhost-web), and every request is answered."""
    url = bouncer.server_url(database)
    with Ledger.from_url(url) as ledger:
        ledger.migrate()
    answers: Counter[int] = Counter()
    with web_server(tmp_path, url, extra=("--pool-size", "2")) as web, psycopg.connect(bouncer.server_url(),
                                                                                        autocommit=True) as conn:
        most = 0

        def ask() -> None:
            with httpx.Client(timeout=30) as client:
                for _ in range(15):
                    answers[client.get(f"{web.base}/healthz").status_code] += 1

        clients = [threading.Thread(target=ask) for _ in range(24)]
        for thread in clients:
            thread.start()
        while any(thread.is_alive() for thread in clients):
            (count,) = conn.execute(  # type: ignore[misc]
                "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND application_name = 'sendhost-web'",
                (database,)).fetchone()
            most = max(most, int(count))
    assert answers == {200: 24 * 15}
    assert 0 < most <= 2


def test_the_statement_timeout_holds_for_each_call_and_never_outlives_it(bouncer: Bouncer, database: str) -> None:
    """Each ledger call runs under the 15 s timeout, set in its own transaction: the pooled server connection, the
    next client's, is left at the server's default."""
    with Ledger.from_url(bouncer.url(database)) as ledger, ledger.calling("read the timeout") as conn:
        assert db.execute(conn, "SELECT current_setting('statement_timeout')").fetchone() == ("15s",)
        with pytest.raises(psycopg.errors.QueryCanceled), conn.pipeline():  # and it is the one that cancels
            db.set_local_timeout(conn, 50)
            conn.execute("SELECT pg_sleep(2)")
        assert conn.execute("SHOW statement_timeout").fetchone() == ("0",)
