"""The guard's promises under real concurrency: many sender processes against one real Redis."""

from __future__ import annotations

import itertools
import multiprocessing
import os
from collections import Counter, defaultdict
from datetime import date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
import redis

from tests.support import warmup_workers
from tests.warmup.conftest import NOW
from warmup import Guard
from warmup.days import jitter_ms
from warmup.keys import GroupKeys

TODAY = date(2026, 11, 30)
pytestmark = pytest.mark.slow


def _run(target: str, args_list: list[tuple[Any, ...]], timeout_s: float = 120) -> list[Any]:
    """Run `warmup_workers.<target>` in one fresh process per args tuple; they start together once all are
    connected and ready (a barrier), so the contention is real. Returns results in args order."""
    # forkserver: no client or socket inherited from the test, and the imports are paid once, not per process.
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["tests.support.warmup_workers"])
    barrier = context.Barrier(len(args_list))
    results = context.Queue()
    processes = [context.Process(target=warmup_workers.run_worker, args=(target, barrier, results, i, args))
                 for i, args in enumerate(args_list)]
    for process in processes:
        process.start()
    try:
        collected = dict(results.get(timeout=timeout_s) for _ in processes)
    finally:
        for process in processes:
            process.join(timeout=10)
            if process.is_alive():
                process.kill()
                process.join()
        results.close()
        results.join_thread()
    return [collected[i] for i in range(len(args_list))]


def test_ten_thousand_concurrent_reservations_give_exactly_the_caps(guard: Guard, redis_url: str) -> None:
    addresses = [f"m{i}@x.com" for i in range(5)]
    for address in addresses:
        # Day 8 of a healthy ramp: cap 15. No gap, so only the cap limits.
        guard.add_mailbox(address, start=TODAY - timedelta(days=7), min_gap_s=0, jitter_s=(0, 0), now=NOW)
    processes, calls = 8, 1250
    results = _run("reserve_n", [(redis_url, addresses, calls, i % 2 == 0, NOW, i) for i in range(processes)])
    reserved = [r for result in results for r in result[0]]
    statuses: Counter[str] = Counter()
    for result in results:
        statuses.update(result[1])
    errors = [e for result in results for e in result[2]]
    assert errors == []
    assert sum(statuses.values()) == processes * calls == 10_000
    assert len(reserved) == 75
    assert Counter(mailbox for mailbox, _ in reserved) == {address: 15 for address in addresses}
    assert len({token for _, token in reserved}) == 75  # every reservation its own token
    assert set(statuses) == {"reserved", "skipped-daily-limit"}


def test_gap_holds_across_sixteen_processes_and_every_mailbox_keeps_pace(guard: Guard, redis_url: str,
                                                                        redis_client: redis.Redis) -> None:
    # 30 s of 16 processes racing a 2 s gap: about 15 chances per mailbox to break it.
    # SENDHOST_GAP_TEST_SECONDS shortens it for a quick local run.
    duration_s = float(os.environ.get("SENDHOST_GAP_TEST_SECONDS", "30"))
    gap_s, jitter = 2.0, (0.0, 0.5)
    addresses = [f"g{i}@x.com" for i in range(10)]
    for address in addresses:
        guard.add_mailbox(address, start=TODAY - timedelta(days=90), min_gap_s=gap_s, jitter_s=jitter)
    seeds = {a: str(redis_client.hget(GroupKeys("default").mailbox(a).state, "jitter_seed")) for a in addresses}
    results = _run("reserve_for", [(redis_url, addresses, i % 2 == 0, duration_s, i) for i in range(16)])
    assert [e for result in results for e in result[3]] == []
    began = min(result[0] for result in results)
    ended = min(result[1] for result in results)
    by_mailbox: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for result in results:
        for mailbox, at_ms, day in result[2]:
            by_mailbox[mailbox].append((at_ms, day))
    assert set(by_mailbox) == set(addresses)
    for address, reservations in by_mailbox.items():
        reservations.sort()
        times = [at for at, _ in reservations]
        # The n-th reservation (in time order, which is its reservation number) drew the jitter after it.
        gaps = [int(gap_s * 1000) + jitter_ms(seeds[address], n, 0, int(jitter[1] * 1000))
                for n in range(1, len(times) + 1)]
        for n, (previous, current) in enumerate(itertools.pairwise(times)):
            assert current - previous >= gaps[n], f"{address}: {current - previous} ms < {gaps[n]} ms"
        # The most the gap allows from the mailbox's first send to the end of the run, by Redis time.
        first = times[0]
        assert first - began < 1000, f"{address} waited {first - began} ms for its first send"
        gap_ms = max(gaps)
        most = (max(ended, times[-1]) - first) // gap_ms + 1
        assert len(times) >= most - 1, f"{address}: {len(times)} sends, the gap allows {most}"


def test_week_one_mailbox_never_gets_an_eleventh_across_its_midnight(guard: Guard, redis_url: str) -> None:
    tz = "Asia/Kolkata"  # a half-hour offset: a UTC-day bug could not hide
    guard.add_mailbox("new@x.com", start=TODAY, min_gap_s=0, jitter_s=(0, 0), timezone=tz, now=NOW)
    midnight = datetime(2026, 12, 1, tzinfo=ZoneInfo(tz)).timestamp()
    # 8 processes; each drives `now` through the 20 minutes around the mailbox's midnight, 300 calls apiece.
    args = []
    for i in range(8):
        nows = [midnight - 600 + (k * 1200 / 300) + i * 0.37 for k in range(300)]
        args.append((redis_url, "new@x.com", nows))
    results = _run("reserve_at", args)
    days = Counter(day for result in results for day in result)
    assert days == {"2026-11-30": 10, "2026-12-01": 10}
    assert guard.reserve("new@x.com", now=midnight - 1).status == "skipped-daily-limit"
    assert guard.reserve("new@x.com", now=midnight + 599).status == "skipped-daily-limit"



def test_two_campaigns_over_four_shared_mailboxes_end_exactly_at_every_cap(guard: Guard, redis_url: str) -> None:
    # 4 mailboxes of cap 15 (60 a day) and two campaigns whose caps add up to them: every day's end is exact only
    # if the campaign's slot and the mailbox's are taken together, freed together, and kept together.
    addresses = [f"c{i}@x.com" for i in range(4)]
    for address in addresses:
        guard.add_mailbox(address, start=TODAY - timedelta(days=7), min_gap_s=0, jitter_s=(0, 0), now=NOW)
    campaigns = [("launch", 25), ("renewal", 35)]
    day_ends_ms = int(datetime(2026, 12, 1, tzinfo=ZoneInfo("UTC")).timestamp() * 1000)
    results = _run("reserve_for_campaigns", [(redis_url, addresses, campaigns, "2026-11-30", day_ends_ms, 300, NOW,
                                              i) for i in range(8)])
    assert [e for result in results for e in result[2]] == []
    reserved = [r for result in results for r in result[0]]
    kept = [(mailbox, campaign) for mailbox, campaign, fate in reserved if fate != "cancelled"]
    assert Counter(campaign for _, campaign in kept) == dict(campaigns)
    assert Counter(mailbox for mailbox, _ in kept) == dict.fromkeys(addresses, 15)
    assert [s.reserved for s in guard.status(addresses, now=NOW)] == [15] * 4
    for name, cap in campaigns:
        count, per_mailbox = guard.campaign_counts("default", name, "2026-11-30")
        assert count == cap
        assert per_mailbox == {m: n for m, n in Counter(m for m, c in kept if c == name).items()}
    # unknown outcomes were among them, and cancels that freed both slots for another reservation
    fates = Counter(fate for _, _, fate in reserved)
    assert fates["unknown"] > 0 and fates["cancelled"] > 0
    statuses: Counter[str] = Counter()
    for result in results:
        statuses.update(result[1])
    assert {"reserved", "skipped-campaign-cap"} <= set(statuses) <= {"reserved", "skipped-campaign-cap",
                                                                      "skipped-daily-limit"}
