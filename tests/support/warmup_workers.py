"""Sender processes for the warmup concurrency tests: each opens its own client and hammers the guard.

Top-level functions so multiprocessing's spawn start method can import them in a fresh interpreter.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Callable
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier
from typing import Any

import redis

from warmup import Guard


def run_worker(target_name: str, barrier: Barrier, results: Queue[Any], index: int, args: tuple[Any, ...]) -> None:
    """Process entry: run `target_name(start, *args)`, where `start()` blocks until every worker is ready."""
    target: Callable[..., Any] = globals()[target_name]
    results.put((index, target(barrier.wait, *args)))


def reserve_n(start: Callable[[], object], url: str, addresses: list[str], calls: int, use_pick: bool,
              now: float | None, seed: int) -> tuple[list[tuple[str, str]], dict[str, int], list[str]]:
    """`calls` reservations as fast as possible; returns (reserved (mailbox, token)), status counts, errors."""
    client = redis.Redis.from_url(url, decode_responses=True)
    guard = Guard(client)
    rng = random.Random(seed)
    reserved: list[tuple[str, str]] = []
    statuses: Counter[str] = Counter()
    errors: list[str] = []
    start()
    for _ in range(calls):
        try:
            decision = guard.pick(addresses, now=now) if use_pick else guard.reserve(rng.choice(addresses), now=now)
        except Exception as exc:  # the test asserts there are none; keep going to count them all
            errors.append(f"{type(exc).__name__}: {exc}")
            continue
        statuses[decision.status] += 1
        if decision.reservation is not None:
            reserved.append((decision.reservation.mailbox, decision.reservation.token))
    client.close()
    return reserved, dict(statuses), errors


def reserve_for(start: Callable[[], object], url: str, addresses: list[str], use_pick: bool, duration_s: float,
                seed: int) -> tuple[int, int, list[tuple[str, int, str]], list[str]]:
    """Reserve as fast as possible for `duration_s` by Redis time; returns (first ms, last ms by Redis TIME,
    reservations (mailbox, at ms, day), errors)."""
    client = redis.Redis.from_url(url, decode_responses=True)
    guard = Guard(client)
    rng = random.Random(seed)
    reservations: list[tuple[str, int, str]] = []
    errors: list[str] = []
    start()
    began = _redis_ms(client)
    deadline = time.monotonic() + duration_s
    while time.monotonic() < deadline:
        try:
            decision = guard.pick(addresses) if use_pick else guard.reserve(rng.choice(addresses))
        except Exception as exc:
            errors.append(f"{type(exc).__name__}: {exc}")
            continue
        if decision.reservation is not None:
            r = decision.reservation
            reservations.append((r.mailbox, r.at_ms, r.day))
    ended = _redis_ms(client)
    client.close()
    return began, ended, reservations, errors


def _redis_ms(client: redis.Redis) -> int:
    seconds, micros = client.time()
    return int(seconds) * 1000 + int(micros) // 1000


def reserve_at(start: Callable[[], object], url: str, address: str, nows: list[float]) -> list[str]:
    """One reservation attempt at each explicit `now`; returns the day of every reservation made."""
    client = redis.Redis.from_url(url, decode_responses=True)
    guard = Guard(client)
    start()
    days = [d.reservation.day for d in (guard.reserve(address, now=now) for now in nows) if d.reservation]
    client.close()
    return days


def reserve_for_campaigns(start: Callable[[], object], url: str, addresses: list[str],
                          campaigns: list[tuple[str, int]], day: str, day_ends_ms: int, calls: int, now: float,
                          seed: int) -> tuple[list[tuple[str, str, str]], dict[str, int], list[str]]:
    """`calls` picks for a campaign drawn at random each time. Of each process's reservations the 1st, 4th, ...
    are never settled (an unknown outcome), the 2nd, 5th, ... refused for good (cancelled, freeing both slots), the
    rest confirmed. Returns (mailbox, campaign, "unknown" | "cancelled" | "confirmed") per reservation, status
    counts, errors."""
    from warmup import CampaignSlot, FailureClass

    client = redis.Redis.from_url(url, decode_responses=True)
    guard = Guard(client)
    rng = random.Random(seed)
    slots = [CampaignSlot(name, day, cap, None, day_ends_ms) for name, cap in campaigns]
    reserved: list[tuple[str, str, str]] = []
    statuses: Counter[str] = Counter()
    errors: list[str] = []
    start()
    for _ in range(calls):
        campaign = rng.choice(slots)
        try:
            decision = guard.pick(addresses, now=now, campaign=campaign)
            statuses[decision.status] += 1
            reservation = decision.reservation
            if reservation is None:
                continue
            fate = ("unknown", "cancelled", "confirmed")[len(reserved) % 3]
            if fate == "cancelled":
                guard.cancel(reservation, FailureClass.RECIPIENT, now=now)
            elif fate == "confirmed":
                guard.confirm(reservation, now=now)
            reserved.append((reservation.mailbox, campaign.name, fate))
        except Exception as exc:  # the test asserts there are none; keep going to count them all
            errors.append(f"{type(exc).__name__}: {exc}")
    client.close()
    return reserved, dict(statuses), errors
