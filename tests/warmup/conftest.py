"""Fixtures for the warmup tests: a guard on the real test Redis, and a fixed instant to drive `now`."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
import redis

from warmup import Guard

# 2026-11-30 12:00 UTC: mid-day everywhere from Honolulu to Tokyo, so tests never straddle a day by accident.
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC).timestamp()


@pytest.fixture
def guard(redis_client: redis.Redis) -> Iterator[Guard]:
    yield Guard(redis_client)
