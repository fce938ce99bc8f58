"""Fixtures of the sender tests: a real PostgreSQL (a fresh database per test), migrated as users migrate."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sender import Ledger
from sender.ledger.events import Feedback
from tests.sender.web_server import WebServer, web_server
from tests.sender.world import World, make_world
from tests.support.clock import FakeClock
from tests.support.submission import SubmissionServer, submission_server


@pytest.fixture
def ledger(database_url: str) -> Iterator[Ledger]:
    with Ledger.from_url(database_url) as opened:
        opened.migrate()
        yield opened


@pytest.fixture
def timed(database_url: str, clock: FakeClock) -> Iterator[Ledger]:
    """A migrated ledger on the test's fake clock (a module sets its own `clock` fixture to start it elsewhere)."""
    with Ledger.from_url(database_url, clock=clock) as opened:
        opened.migrate()
        yield opened


@pytest.fixture
def feedback(database_url: str) -> Iterator[Feedback]:
    with Feedback.from_url(database_url) as opened:
        opened.ledger.migrate()
        yield opened


@pytest.fixture
def web(tmp_path: Path, database_url: str, feedback: Feedback) -> Iterator[WebServer]:
    """`sendhost sender web` under uvicorn on a free loopback port, on a migrated ledger."""
    with web_server(tmp_path, database_url) as server:
        yield server


@pytest.fixture
def submission(tmp_path: Path) -> Iterator[SubmissionServer]:
    with submission_server(tmp_path, {}) as server:
        yield server


@pytest.fixture
def world(tmp_path: Path, database_url: str, redis_url: str, submission: SubmissionServer) -> World:
    return make_world(tmp_path, database_url, redis_url, submission)
