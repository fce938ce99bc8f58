"""The web service's log rate limit (no I/O): a flood of one line costs a burst, then one line saying how many."""

from __future__ import annotations

import logging

import pytest

from sender.feedback.guard import RateLimit


def _record(msg: str, *args: object) -> logging.LogRecord:
    return logging.LogRecord("sendhost.sender.web", logging.WARNING, __file__, 1, msg, args, None)


def test_a_flood_of_one_line_passes_a_burst_then_counts_what_it_dropped(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [1000.0]
    monkeypatch.setattr("sender.feedback.guard.time.monotonic", lambda: now[0])
    limit = RateLimit(burst=5, window_s=10)
    passed = [limit.filter(_record("accept failed: %s", n)) for n in range(10_000)]
    assert sum(passed) == 5 and passed[:5] == [True] * 5
    # another template is not held back by the flood
    assert limit.filter(_record("something else"))
    now[0] += 10
    first = _record("accept failed: %s", "again")
    assert limit.filter(first)
    assert first.getMessage() == "accept failed: again (and 9995 more like it dropped)"


def test_the_cached_collector_reads_the_ledger_once_per_window(monkeypatch: pytest.MonkeyPatch) -> None:
    from collections.abc import Iterator

    from prometheus_client.core import GaugeMetricFamily, Metric
    from prometheus_client.registry import Collector

    from sender.feedback.metrics import CachedCollector

    now, reads = [0.0], []

    class Counting(Collector):
        def collect(self) -> Iterator[Metric]:
            reads.append(now[0])
            yield GaugeMetricFamily("x", "reads so far", value=len(reads))

    monkeypatch.setattr("sender.feedback.metrics.time.monotonic", lambda: now[0])
    cached = CachedCollector(Counting(), max_age_s=15)
    values = []
    for step in range(31):  # a scrape a second for 31 s
        now[0] = float(step)
        values.append(next(iter(cached.collect())).samples[0].value)
    assert reads == [0.0, 15.0, 30.0]
    assert values == [1.0] * 15 + [2.0] * 15 + [3.0]
