"""Throughput of the sender agent against a bare smtplib loop, measured in the same run, on the same servers.

    python -m bench.send [--processes N] [--messages M] [--rounds R] [--database-url URL] [--redis-url URL]

One local submission server (aiosmtpd in a process of its own: STARTTLS with a trustme certificate, AUTH required)
takes every message. The same N processes run each phase, interleaved over R rounds:
  bare       smtplib: connect from a slot address (rotating, as leases do), EHLO, STARTTLS, EHLO, AUTH, MAIL,
             RCPT, DATA, QUIT: one authenticated TLS session per message, as the agent's must be;
  mandatory  the bare loop plus, per message, the calls any sender with the agent's guarantees (exactly once,
             warm-up caps, leased source addresses) must make, called directly: the ledger's claim, Guard.pick,
             Pool.lease, the attempt's durable start with its last suppression check (beside the session's
             opening), the send-log record, Guard.confirm and the lease's release. The same SQL functions and Lua
             scripts as the agent, none of its loop or message building: the guarantees' least cost on these servers;
  agent      Agent.send_one over as many rows: claim (PostgreSQL), Guard.pick (Redis), Pool.lease (Redis), last
             suppression check and attempt start (PostgreSQL), the same submission, record, confirm, release.
agent / mandatory is then the agent's own overhead, mandatory / bare the cost of the guarantees.
The agent's own time is broken down by phase from its checkpoints, and every phase's CPU time per message by
process (senders, their PostgreSQL backends, Redis, the SMTP server): while the CPUs are the bottleneck, messages/s
is CPUs / CPU per message, so the CPU ratio is the agent's ceiling. Then, in one process: claims/s (sender_claim of
one row, 2,000 queued) against bare `SELECT 1` round trips.
Ratios print last, each with the range of its rounds. Target: agent >= 0.75x bare.
"""

from __future__ import annotations

import argparse
import functools
import multiprocessing
import os
import secrets
import shutil
import smtplib
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import Future
from datetime import UTC, datetime, timedelta
from email.message import EmailMessage
from pathlib import Path
from statistics import median
from typing import Any

HOST = "bench-1"
PRIMARY = "127.0.0.1"
SLOTS = [f"127.0.0.{n}" for n in range(2, 10)]
SLOT_BUDGET = 100_000
GROUP_SIZE = 25  # mailboxes per group, each at the ramp's ceiling: `day_capacity` sends a day between them
WARMED_DAYS = 120  # how long ago the bench's mailboxes started: long enough to reach the ceiling
MAILBOXES = [f"box{n}@bench.example" for n in range(GROUP_SIZE)]
# The mandatory phase reserves from a group of its own, as large (a pick's script reads every mailbox of its group),
# so the two phases do not share the day's caps.
MANDATORY_GROUP = "mandatory"
MANDATORY_MAILBOXES = [f"box{n}@mandatory.example" for n in range(GROUP_SIZE)]
KINDS = ("bare", "mandatory", "agent")  # run in this order each round
PHASES = ("claim", "reserve", "lease", "check+begin", "submit", "record", "confirm+release")
CHECKPOINT_PHASE = {"claimed": "claim", "reserved": "reserve", "leased": "lease", "attempt_started": "check+begin",
                    "submitted": "submit", "recorded": "record"}


# --- the submission server, in its own process -------------------------------------------------------------------

def serve(port: int, cert_dir: str, ready: Any) -> None:
    import trustme
    from aiosmtpd.controller import Controller
    from aiosmtpd.smtp import AuthResult, LoginPassword

    ca = trustme.CA()
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ca.issue_cert(PRIMARY).configure_cert(context)
    ca.cert_pem.write_to_path(str(Path(cert_dir) / "ca.pem"))

    class Handler:
        async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
            return "250 2.0.0 OK"

    def authenticate(server: Any, session: Any, envelope: Any, mechanism: str, data: Any) -> AuthResult:
        return AuthResult(success=isinstance(data, LoginPassword) and data.password == b"secret", handled=False)

    import logging
    logging.getLogger("mail.log").setLevel(logging.ERROR)
    controller = Controller(Handler(), hostname=PRIMARY, port=port, tls_context=context, require_starttls=True,
                            auth_required=True, authenticator=authenticate, ready_timeout=10)
    controller.start()
    ready.set()
    threading.Event().wait()


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system, every thread) process `pid` has used so far; 0 when /proc cannot tell."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return 0.0


def machine_busy_seconds() -> float:
    """CPU time every CPU of the machine has spent not idle so far (from /proc/stat)."""
    try:
        ticks = [int(t) for t in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    except (OSError, ValueError):
        return 0.0
    idle = ticks[3] + ticks[4]  # idle, iowait
    return (sum(ticks[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind((PRIMARY, 0))
        return int(probe.getsockname()[1])


# --- the three loops ---------------------------------------------------------------------------------------------

def bare_message(sender: str, to: str, message_id: str, n: int) -> EmailMessage:
    """The bare loop's message: From, To, Subject, Message-ID and a short body with a link."""
    message = EmailMessage()
    message["From"], message["To"], message["Subject"], message["Message-ID"] = sender, to, "Hi", message_id
    message.set_content(f"Hello {n}\n\nUnsubscribe: https://u.bench.example/u/x\n")
    return message


def submit(port: int, context: ssl.SSLContext, source_ip: str, message: EmailMessage,
           before_handoff: Callable[[], None] | None = None) -> None:
    """One authenticated STARTTLS session for one message; `before_handoff()` runs between AUTH and MAIL FROM."""
    with smtplib.SMTP(PRIMARY, port, timeout=30, source_address=(source_ip, 0)) as smtp:
        smtp.ehlo()
        smtp.starttls(context=context)
        smtp.ehlo()
        smtp.login(str(message["From"]), "secret")
        if before_handoff is not None:
            before_handoff()
        smtp.send_message(message)


def bare_worker(index: int, count: int, port: int, ca_file: str, start: Any, out: Any) -> None:
    context = ssl.create_default_context(cafile=ca_file)
    start.wait()
    began, cpu = time.perf_counter(), time.process_time()
    for n in range(count):
        message = bare_message(MAILBOXES[n % len(MAILBOXES)], f"r{n}@x.example",
                               f"<{secrets.token_hex(8)}@bench.example>", n)
        submit(port, context, SLOTS[(index + n) % len(SLOTS)], message)
    out.put(("bare", began, time.perf_counter(), {}, {"clients": time.process_time() - cpu}))


def mandatory_worker(index: int, count: int, port: int, ca_file: str, database_url: str, redis_url: str,
                     start: Any, out: Any) -> None:
    """The bare loop plus the guarantees' calls, each made once, directly (see the module's docstring)."""
    import uuid
    from concurrent.futures import ThreadPoolExecutor

    import redis

    from ippool import Pool
    from sender import Ledger
    from sender.sending.counters import rebuild
    from sender.sending.message import message_id_for
    from warmup import Guard

    settings = agent_settings(port, ca_file, MANDATORY_MAILBOXES, MANDATORY_GROUP)
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    guard, pool = Guard(client), Pool(client)
    ledger = Ledger.from_url(database_url)
    rebuild(guard, ledger, MANDATORY_GROUP, settings.mailboxes)  # the agent's prepare(), outside the clock
    addresses, groups, worker = tuple(MANDATORY_MAILBOXES), [MANDATORY_GROUP], f"mandatory-{index}"
    context = ssl.create_default_context(cafile=ca_file)
    side = ThreadPoolExecutor(max_workers=1)
    backend = ledger._conn.info.backend_pid
    start.wait()
    began, cpu, backend_cpu = time.perf_counter(), time.process_time(), cpu_seconds(backend)
    for n in range(count):
        row = ledger.claim(worker, 1, groups)[0]
        reservation = guard.pick(addresses).reservation
        assert reservation is not None, "the mandatory group ran out of its day's caps"
        lease = pool.lease(HOST, ttl_s=settings.lease_ttl, primary_ip=PRIMARY)
        message_id = message_id_for(row.idempotency_key, reservation.mailbox)
        # the attempt's durable start beside the session's opening, as the agent runs them
        started = side.submit(ledger.begin_attempt, row.id, uuid.uuid4(), reservation.mailbox, lease.source_ip,
                              message_id)
        submit(port, context, str(lease.source_ip), bare_message(reservation.mailbox, row.address, message_id, n),
               functools.partial(require_started, started))
        ledger.record_sent(row.id, "2.0.0 OK")
        guard.confirm(reservation)
        lease.release()
    used = {"clients": time.process_time() - cpu, "postgres": cpu_seconds(backend) - backend_cpu}
    out.put(("mandatory", began, time.perf_counter(), {}, used))
    ledger.close()


def require_started(started: Future[tuple[str, str | None]]) -> None:
    """Hand over only after the attempt's start committed (what makes a crash afterwards settle as unconfirmed)."""
    outcome, _message_id = started.result()
    if outcome != "ok":
        raise SystemExit(f"bench: the attempt did not start: {outcome}")


def agent_settings(port: int, ca_file: str, addresses: list[str], group: str) -> Any:
    """The bench's AgentSettings: `addresses` in `group`, warmed up to their ceiling, no gap between sends."""
    from sender.settings import AgentSettings
    from sendhost.model import Credential, Mailbox, Submission

    secret_file = Path(ca_file).parent / "password"
    start_day = datetime.now(UTC).date() - timedelta(days=WARMED_DAYS)
    mailboxes = tuple(
        Mailbox(address=a, domain=a.rpartition("@")[2], group=group, start=start_day, min_gap_s=0, jitter_s=(0, 0),
                smtp=Submission(PRIMARY, port, "starttls", "bench", Credential(a, password_file=str(secret_file)),
                                ca_file=ca_file))
        for a in addresses)
    return AgentSettings(HOST, PRIMARY, mailboxes, "https://u.bench.example")


def day_capacity() -> int:
    """What one group of the bench's mailboxes may send today: each phase's rows must fit, or its workers would wait
    for tomorrow's caps."""
    from warmup.schedule import cap_on

    today = datetime.now(UTC).date()
    return GROUP_SIZE * cap_on(today - timedelta(days=WARMED_DAYS), today).cap


def agent_worker(index: int, count: int, port: int, ca_file: str, database_url: str, redis_url: str, start: Any,
                 out: Any) -> None:
    import redis

    from ippool import Pool
    from sender import Ledger
    from sender.sending.agent import Agent
    from warmup import Guard

    settings = agent_settings(port, ca_file, MAILBOXES, "bench")
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    phases: dict[str, float] = defaultdict(float)
    mark = [0.0]

    def checkpoint(name: str) -> None:
        now = time.perf_counter()
        phases[CHECKPOINT_PHASE[name]] += now - mark[0]
        mark[0] = now

    agent = Agent(settings, Guard(client), Pool(client), unsubscribe_key=b"k" * 32, checkpoint=checkpoint)
    ledger = Ledger.from_url(database_url)
    agent.prepare(ledger)
    backend = ledger._conn.info.backend_pid
    start.wait()
    began, cpu, backend_cpu = time.perf_counter(), time.process_time(), cpu_seconds(backend)
    sent = 0
    while sent < count:
        mark[0] = time.perf_counter()
        report = agent.send_one(ledger, f"bench-{index}")
        if report is None:
            break
        phases["confirm+release"] += time.perf_counter() - mark[0]
        sent += report.kind == "sent"
    used = {"clients": time.process_time() - cpu, "postgres": cpu_seconds(backend) - backend_cpu}
    out.put(("agent", began, time.perf_counter(), dict(phases), used))
    ledger.close()


def run_phase(kind: str, processes: int, per_process: int, args: tuple[Any, ...],
              watched: dict[str, int]) -> tuple[float, dict[str, float], dict[str, float]]:
    """(messages/s, the agent's seconds by phase, CPU seconds by part: the workers, their PostgreSQL backends,
    the processes in `watched` (name: pid) and the rest of the machine)."""
    context = multiprocessing.get_context("spawn")
    start, out = context.Event(), context.Queue()
    targets: dict[str, Callable[..., None]] = {"bare": bare_worker, "mandatory": mandatory_worker,
                                               "agent": agent_worker}
    target = targets[kind]
    procs = [context.Process(target=target, args=(i, per_process, *args, start, out)) for i in range(processes)]
    for proc in procs:
        proc.start()
    time.sleep(0.5 if kind == "bare" else 1.5)  # let every process import and connect before the clock starts
    before = {name: cpu_seconds(pid) for name, pid in watched.items()}
    busy = machine_busy_seconds()
    start.set()
    results = [out.get(timeout=600) for _ in procs]
    busy = machine_busy_seconds() - busy
    cpu: dict[str, float] = defaultdict(float)
    for name, pid in watched.items():
        cpu[name] = cpu_seconds(pid) - before[name]
    for proc in procs:
        proc.join()
    elapsed = max(r[2] for r in results) - min(r[1] for r in results)
    phases: dict[str, float] = defaultdict(float)
    for _kind, _began, _ended, times, used in results:
        for name, seconds in times.items():
            phases[name] += seconds
        for name, seconds in used.items():
            cpu[name] += seconds
    cpu["rest of the machine"] = max(busy - sum(cpu.values()), 0.0)
    return processes * per_process / elapsed, dict(phases), dict(cpu)


# --- claims against SELECT 1 ---------------------------------------------------------------------------------

def claim_rates(database_url: str, count: int) -> tuple[float, float, float]:
    from sender import Ledger

    with Ledger.from_url(database_url) as ledger:
        for n in range(count):
            ledger.enqueue(lead=f"C{n}", step=1, address=f"c{n}@x.example", group="claims", subject="s", text="t")
        conn = ledger._conn
        began = time.perf_counter()
        for _ in range(count):
            conn.execute("SELECT 1").fetchone()
        select_rate = count / (time.perf_counter() - began)
        began = time.perf_counter()
        for _ in range(count):
            ledger.claim("bench", 1, ["claims"])
        claim_rate = count / (time.perf_counter() - began)
        # a one-row INSERT committed durably (WAL flushed): what the attempt's start pays for the disk
        conn.execute("CREATE TABLE bench_commits (n integer)")
        began = time.perf_counter()
        for n in range(count // 4):
            conn.execute("INSERT INTO bench_commits VALUES (%s)", (n,))
        commit_ms = (time.perf_counter() - began) / (count // 4) * 1000
    return claim_rate, select_rate, commit_ms


# --- set-up ------------------------------------------------------------------------------------------------------

def start_redis(workdir: str) -> tuple[subprocess.Popen[bytes], str]:
    import redis

    from sendhost.embedded import redis_server_executable

    sock = Path(workdir) / "redis.sock"
    process = subprocess.Popen([redis_server_executable(), "--port", "0", "--unixsocket", str(sock), "--save", "",
                                "--appendonly", "no", "--dir", workdir],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"unix://{sock}"
    for _ in range(500):
        try:
            redis.Redis.from_url(url).ping()
            return process, url
        except (redis.RedisError, OSError):
            time.sleep(0.02)
    raise SystemExit("bench: redis-server did not start")


def database(admin_url: str | None) -> tuple[str, str]:
    """(admin URL, URL of a fresh database for this run)."""
    import psycopg

    candidates = [admin_url] if admin_url else ["postgresql://postgres@127.0.0.1:5432/postgres"]
    for url in candidates:
        try:
            with psycopg.connect(url, autocommit=True, connect_timeout=2) as conn:
                name = f"sendhost_bench_{secrets.token_hex(4)}"
                conn.execute(f'CREATE DATABASE "{name}"')
                return url, url.rsplit("/", 1)[0] + f"/{name}"
        except psycopg.Error:
            continue
    from sender.embedded import embedded_url

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        url = embedded_url(Path(tempfile.mkdtemp(prefix="sendhost-bench-")))
    return url, url


def prepare_round(database_url: str, redis_url: str, rows: int, round_no: int) -> None:
    import redis

    from ippool import Pool
    from sender import Ledger

    client = redis.Redis.from_url(redis_url, decode_responses=True)
    pool = Pool(client)
    # Budgets no round exhausts: every lease is a slot's, as on a host whose rotator keeps its slots active (with
    # the default 8-15 sends per address, most leases of a round fell back to the primary IP and skipped Redis).
    pool.register_host(HOST, PRIMARY, (SLOT_BUDGET, SLOT_BUDGET))
    for slot, address in enumerate(SLOTS):
        pool.put_address(HOST, slot, private_ip=address)  # fresh budgets each round
    client.close()
    with Ledger.from_url(database_url) as ledger:
        ledger.migrate()
        for group in ("bench", MANDATORY_GROUP):
            for n in range(rows):
                ledger.enqueue(lead=f"R{round_no}-{group}-{n}", step=1, address=f"r{round_no}-{group}-{n}@x.example",
                               group=group, subject=f"Hello {n}", text=f"Hi {n}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--messages", type=int, default=150, help="per process and phase, each round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--database-url", help="an admin URL of a PostgreSQL that may create a database")
    parser.add_argument("--redis-url")
    args = parser.parse_args()
    if min(args.processes, args.messages, args.rounds) < 1:
        raise SystemExit("bench: --processes, --messages and --rounds must each be at least 1")
    if (wanted := args.processes * args.messages * args.rounds) > (capacity := day_capacity()):
        raise SystemExit(f"bench: --processes x --messages x --rounds = {wanted:,} sends per phase, more than its "
                         f"mailbox group may send in a day ({capacity:,}); pass fewer --messages or --rounds")

    workdir = tempfile.mkdtemp(prefix="sendhost-bench-")
    redis_proc = None
    redis_url = args.redis_url
    if redis_url is None:
        redis_proc, redis_url = start_redis(workdir)
    admin_url, database_url = database(args.database_url)
    (Path(workdir) / "password").write_text("secret\n")
    port = free_port()
    context = multiprocessing.get_context("spawn")
    ready = context.Event()
    server = context.Process(target=serve, args=(port, workdir, ready), daemon=True)
    server.start()
    ready.wait(30)
    ca_file = str(Path(workdir) / "ca.pem")
    rates: dict[str, list[float]] = defaultdict(list)
    phases: dict[str, float] = defaultdict(float)
    cpu: dict[str, dict[str, float]] = {kind: defaultdict(float) for kind in KINDS}
    watched = {"smtp server": server.pid or 0} | ({"redis": redis_proc.pid} if redis_proc is not None else {})
    try:
        for round_no in range(args.rounds):
            prepare_round(database_url, redis_url, args.processes * args.messages, round_no)
            for kind in KINDS:
                phase_args = (port, ca_file) if kind == "bare" else (port, ca_file, database_url, redis_url)
                rate, round_phases, used = run_phase(kind, args.processes, args.messages, phase_args, watched)
                rates[kind].append(rate)
                for name, seconds in used.items():
                    cpu[kind][name] += seconds
                for name, seconds in round_phases.items():
                    phases[name] += seconds
            print(f"round {round_no + 1}: " + ", ".join(f"{kind} {rates[kind][-1]:.1f} msg/s" for kind in KINDS),
                  flush=True)
        claim_rate, select_rate, commit_ms = claim_rates(database_url, 2000)
    finally:
        server.terminate()
        if redis_proc is not None:
            redis_proc.terminate()
            redis_proc.wait(10)
        shutil.rmtree(workdir, ignore_errors=True)
        if admin_url != database_url:
            import psycopg

            with psycopg.connect(admin_url, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{database_url.rsplit("/", 1)[1]}" WITH (FORCE)')

    total = sum(phases.values()) or 1.0
    messages = args.rounds * args.processes * args.messages
    print(f"\nagent time per message, by phase ({args.processes} processes, {args.rounds} rounds):")
    for name in PHASES:
        print(f"  {name:16s} {phases.get(name, 0.0) / messages * 1000:7.2f} ms  {phases.get(name, 0.0) / total:6.1%}")
    print(f"  (check+begin is one durable commit; a bare durable commit takes {commit_ms:.2f} ms here)")
    parts = ["clients", "postgres", "redis", "smtp server"]
    print(f"\nCPU per message, by process ({os.cpu_count()} CPUs; 'postgres' is the workers' own backends):")
    print(f"  {'':20s}" + "".join(f"{kind:>10s}" for kind in KINDS))
    for name in [*parts, "rest of the machine"]:
        print(f"  {name:20s}" + "".join(f"{cpu[kind].get(name, 0.0) / messages * 1000:10.2f}" for kind in KINDS)
              + "  ms")
    bench_cpu = {kind: sum(cpu[kind].get(name, 0.0) for name in parts) / messages * 1000 for kind in KINDS}
    print(f"  {'the bench, in all':20s}" + "".join(f"{bench_cpu[kind]:10.2f}" for kind in KINDS) + "  ms")
    print(f"\nclaims/s (one row per claim): {claim_rate:.0f}; bare SELECT 1 round trips/s: {select_rate:.0f}")
    print("\nmessages/s (median of rounds): " + ", ".join(f"{kind} {median(rates[kind]):.1f}" for kind in KINDS))
    def ratio(kind: str, base: str, what: str) -> None:
        ratios = [rate / of for rate, of in zip(rates[kind], rates[base], strict=True)]
        print(f"ratio {what}: {median(ratios):.2f}x (rounds {min(ratios):.2f}-{max(ratios):.2f}x), CPU per message "
              f"{base} / {kind}: {bench_cpu[base] / bench_cpu[kind]:.2f}x")

    ratio("agent", "bare", "agent / bare smtplib (target >= 0.75x)")
    ratio("mandatory", "bare", "mandatory / bare smtplib (the guarantees' cost)")
    ratio("agent", "mandatory", "agent / mandatory (the agent's own overhead)")
    print(f"ratio claim / SELECT 1: {claim_rate / select_rate:.2f}x")

if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    main()
