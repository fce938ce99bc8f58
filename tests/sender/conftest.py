"""Fixtures of the sender tests: a real PostgreSQL (a fresh database per test), migrated as users migrate."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sender import Ledger
from tests.support.postgres_server import fresh_database, postgres_admin_url


@pytest.fixture(scope="session")
def postgres_admin() -> Iterator[str]:
    with postgres_admin_url() as url:
        yield url


@pytest.fixture
def database_url(postgres_admin: str) -> Iterator[str]:
    """An empty database of its own for this test."""
    with fresh_database(postgres_admin) as url:
        yield url


@pytest.fixture
def ledger(database_url: str) -> Iterator[Ledger]:
    with Ledger.from_url(database_url) as opened:
        opened.migrate()
        yield opened
