"""The sender agent: one row at a time through the send path, claim → reserve → lease → attempt → submit → settle.

Each step is its own module: sender.sending.claim, .gate (an attempt that started before, the content), .reserve
(the mailbox's reservation and, held beside it, the lease: the pool's own call, ippool.Pool.lease), .attempt (the
attempt's start, the submission), .settle. A step returns what the next needs, or a stop (sender.sending.report): a
`GiveBack`, written by the agent's one give-back path, or a `Report` of a row it settled. What a step took is undone
in reverse when a later one fails. No transaction or lock is held across the SMTP conversation: every ledger call is
one database function. `checkpoint(name)` is called after each step (fault-injection tests SIGKILL the process
there): claimed, reserved, leased, attempt_started, submitted, recorded. A send's record claims the worker's next
row in the same round trip (a killed agent leaves that row `sending` without an attempt: the sweep requeues it); a
stopping worker gives it back.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import TypeVar

from ippool import Lease, Pool
from sender.errors import LedgerUnavailable
from sender.ledger import window_intervals
from sender.ledger.history import make_partitions
from sender.ledger.store import Claimed, Ledger
from sender.oauth import TokenKeeper
from sender.oauth.opening import open_refreshing
from sender.sending.activity import Activity
from sender.sending.attempt import Attempt, Attempts, Opener
from sender.sending.claim import Claims
from sender.sending.counters import rebuild
from sender.sending.gate import Gate, Ready
from sender.sending.guard_settings import GuardSettings
from sender.sending.persist import persist
from sender.sending.report import GiveBack, Report, Stop
from sender.sending.reserve import Held, Reserver
from sender.sending.settle import Settler
from sender.sending.submission import ResultKind
from sender.sending.windows import Windows
from sender.settings import AgentSettings
from sendhost.model import Mailbox
from warmup import Guard, Picker
from warmup.errors import WarmupConfigError, WarmupUnavailable

__all__ = ["CHECKPOINTS", "Agent", "Report"]

log = logging.getLogger("sendhost.sender")

CHECKPOINTS = ("claimed", "reserved", "leased", "attempt_started", "submitted", "recorded")
ONCE_HORIZON_S = 60.0  # --once waits out blocks up to this long, then leaves the rest for a later run
SWEEP_EVERY_S = 60.0
# the history's months are made two months ahead (sender.ledger.history), and the daily task (the Postmaster Tools
# sync) runs: at the start, then once a day
PARTITIONS_EVERY_S = 86400.0
IDLE_POLL_S = 1.0

T = TypeVar("T")


def _make_partitions(ledger: Ledger) -> None:
    """The history's months ahead. A failure other than the ledger's being down stops no send (a send without its
    month lands in DEFAULT, moved out when the month is made): it is logged, and tried again the next day."""
    try:
        made = make_partitions(ledger)
    except LedgerUnavailable:
        raise
    except Exception:
        log.exception("sender: making the history's months ahead failed; sending goes on")
        return
    if made:
        log.info("sender: made %d month partition(s) of the history", made)


class Agent:
    """The send path for one host. Share one Agent between worker threads; give each its own Ledger."""

    def __init__(self, settings: AgentSettings, guard: Guard, pool: Pool, *,
                 unsubscribe_key: bytes, checkpoint: Callable[[str], None] | None = None,
                 env: Mapping[str, str] | None = None, sleep: Callable[[float], None] = time.sleep,
                 side_tasks: Executor | None = None, clock: Callable[[], float] = time.time,
                 pick: Picker | None = None,
                 source_address: Callable[[Lease], str | None] | None = None,
                 mailbox_settings: Callable[[], Sequence[Mailbox]] | None = None,
                 tokens: TokenKeeper | None = None, daily: Callable[[], object] | None = None,
                 opener: Opener = open_refreshing) -> None:
        """`clock` (epoch seconds) is the time of the counter rebuild; give the guard the same one. `pick` reserves
        a mailbox among a group's (default `guard.pick`); `source_address` is the address a lease's send binds to
        (default the lease's `source_ip`). The simulation passes both (sender.assembly builds it).
        `mailbox_settings` reads the inventory's mailboxes as they are now, whose warm-up settings reach the guard
        at the start and each sweep cycle (default: those of `settings`, read once). `tokens` keeps the OAuth
        mailboxes' access tokens (default: one that pauses a mailbox whose grant is refused). `daily` runs once a
        day on the side tasks (the Postmaster Tools sync, sender.postmaster.daily): it must catch its own errors.
        `opener` opens a mailbox's submission session (a forecast's hands nothing over: simulation.forecast)."""
        self.settings = settings
        self.guard = guard
        self.pool = pool
        self._checkpoint = checkpoint or (lambda name: None)
        self._sleep = sleep
        self._clock = clock
        self._groups = settings.by_group()
        mailboxes = {m.address.lower(): m for m in settings.mailboxes}
        self.worker_prefix = f"{socket.gethostname()}:{os.getpid()}"
        # Threads for work beside a send: opening its SMTP session, settling its lease and reservation. The
        # simulation passes an inline executor: one thread on its simulated clock, the same order every run.
        self._side_tasks = side_tasks or ThreadPoolExecutor(max_workers=64, thread_name_prefix="sender-side")
        windows = Windows()
        self._guard_settings = GuardSettings(mailbox_settings or (lambda: settings.mailboxes), mailboxes)
        # the steps of the send path, in order
        self._claims = Claims(self.groups, sorted(mailboxes))
        self._gate = Gate(windows, clock, unsubscribe_key, settings.unsubscribe_base_url, self._persist)
        self._reserver = Reserver(guard,
                                  {g: tuple(m.address.lower() for m in ms) for g, ms in self._groups.items()},
                                  windows.pace, self._rebuild, pick)
        self._lease = functools.partial(pool.lease, settings.host, ttl_s=settings.lease_ttl,
                                        primary_ip=settings.primary_ip)
        self._attempts = Attempts(mailboxes, tokens or TokenKeeper(env=env, on_refused=guard.pause),
                                  self._side_tasks, source_address or (lambda lease: lease.source_ip),
                                  opener, settings.smtp_timeout_s)
        self._settler = Settler(guard, pool.retire_blamed, settings.retry_delay_s, self._persist, self._checkpoint)
        self._daily = daily

    @property
    def groups(self) -> list[str]:
        return sorted(self._groups)

    def prepare(self, ledger: Ledger) -> None:
        """Rebuild every group's warm-up counters from the ledger (at start: Redis may have lost them)."""
        for group in self._groups:
            self._rebuild(ledger, group)
        self._guard_settings.cycle(self.guard)  # an inventory edited while no agent ran

    def _rebuild(self, ledger: Ledger, group: str) -> None:
        rebuild(self.guard, ledger, group, self._groups[group], clock=self._clock)

    # --- one row ------------------------------------------------------------------------------------------------

    def send_one(self, ledger: Ledger, worker: str) -> Report | None:
        """Claim one due row and take it through the send path; None when no row is due."""
        row = self._claims.next(ledger, worker)
        if row is None:
            return None
        self._checkpoint("claimed")
        ready = self._gate.check(ledger, row)
        if not isinstance(ready, Ready):
            return self._reported(ledger, row, ready)
        held = self._reserver.reserve(ledger, row, ready.now)
        if not isinstance(held, Held):
            return self._reported(ledger, row, held)
        self._checkpoint("reserved")
        try:
            held.lease = self._lease()
            self._checkpoint("leased")
            attempt = self._attempts.start(ledger, row, held, ready.content)
            if not isinstance(attempt, Attempt):
                return self._reported(ledger, row, attempt)
            self._checkpoint("attempt_started")
            result = attempt.submit(row, ready.content, ready.unsubscribe, ready.now)
            self._checkpoint("submitted")
            report = self._settler.settle(ledger, row, held.reservation, attempt.mailbox.address, attempt.source_ip,
                                          result, self._record(worker), attempt.message_id, held.lease)
            held.accepted = result.kind is ResultKind.ACCEPTED
            return self._reported(ledger, row, report)
        except BaseException:
            if held.undo():  # failed before the attempt started: the reservation is back, so is the row
                with contextlib.suppress(LedgerUnavailable):  # if the ledger is down too, the sweep requeues it
                    self._give_back(ledger, row.id, GiveBack(0.0, "the send path failed before the attempt"))
            raise
        finally:
            held.finish(self._side_tasks)

    def _reported(self, ledger: Ledger, row: Claimed, end: Stop) -> Report:
        """The one way a pass ends: a row given back goes back to the queue, a row a step settled is reported, and
        every report names the row's lead and step (for its activity line)."""
        report = self._give_back(ledger, row.id, end) if isinstance(end, GiveBack) else end
        return replace(report, lead=row.lead, address=row.address, step=row.step)

    def _give_back(self, ledger: Ledger, row: int, back: GiveBack) -> Report:
        """The one way a claimed row goes back to the queue unsent: due again after `back.delay_s`, with
        `back.reason` in its history."""
        ledger.unclaim(row, back.delay_s, back.reason)
        until = datetime.fromtimestamp(self._clock(), UTC) + timedelta(seconds=back.delay_s) if back.delay_s else None
        return back.report(row, until)

    def _record(self, worker: str) -> Callable[[Ledger, Claimed, str], None]:
        return lambda ledger, row, reply: self._claims.record(ledger, row, reply, worker, self._persist)

    def give_back_claimed_ahead(self, ledger: Ledger, worker: str) -> None:
        """A stopping worker's row claimed ahead goes back to the queue now (else the sweep requeues it later)."""
        ahead = self._claims.ahead(worker)
        if ahead is not None:
            with contextlib.suppress(LedgerUnavailable):
                self._give_back(ledger, ahead.id, GiveBack(0.0, "the agent stopped before sending it"))

    def _persist(self, ledger: Ledger, write: Callable[[], T]) -> T:
        """Write what already happened, through a database restart: reconnect and retry for a while."""
        return persist(ledger, write, self._sleep)

    # --- the loop -----------------------------------------------------------------------------------------------

    def work(self, ledger_factory: Callable[[], Ledger], index: int, *, once: bool, stop: threading.Event,
             reports: list[Report] | None = None, activity: Activity | None = None) -> None:
        """One worker: send until `stop` (or, with `once`, until nothing is due within a minute). `activity` is
        told each row's report and each idle turn (its lines: sender.sending.activity)."""
        worker = f"{self.worker_prefix}:{index}"
        ledger: Ledger | None = None
        last_sweep = 0.0
        last_partitions: float | None = None
        backoff = 0.2
        while not stop.is_set():
            try:
                if ledger is None:
                    ledger = ledger_factory()
                if index == 0 and (last_partitions is None
                                   or time.monotonic() - last_partitions >= PARTITIONS_EVERY_S):
                    _make_partitions(ledger)
                    if self._daily is not None:  # beside the sending, never in its way
                        self._side_tasks.submit(self._daily)
                    last_partitions = time.monotonic()
                if index == 0 and time.monotonic() - last_sweep >= SWEEP_EVERY_S:
                    requeued, unconfirmed = ledger.sweep(self.settings.sweep_after_s)
                    if requeued or unconfirmed:
                        log.warning("sender: sweep requeued %d and settled %d as unconfirmed", requeued,
                                    unconfirmed)
                    # the sending windows' intervals the claim reads, HORIZON ahead: they never run out while we run;
                    # and the rows due in a window closed now, moved to its opening
                    window_intervals.sweep(ledger)
                    last_sweep = time.monotonic()
                    self._guard_settings.cycle(self.guard)  # the inventory's warm-up edits since the last cycle
                report = self.send_one(ledger, worker)
                due = None if report is not None else ledger.next_due_s(self.groups)
                backoff = 0.2
            except (WarmupUnavailable, WarmupConfigError) as exc:  # Redis down, or a mailbox set up wrong
                log.error("sender: %s; trying again in %.1fs", exc, backoff)
                stop.wait(backoff)
                backoff = min(backoff * 2, 5.0)
                continue
            except LedgerUnavailable as exc:
                log.warning("sender: %s; reconnecting in %.1fs", exc, backoff)
                if ledger is not None:
                    with contextlib.suppress(Exception):
                        ledger.close()
                ledger = None
                stop.wait(backoff)
                backoff = min(backoff * 2, 5.0)
                continue
            except Exception:
                # A bug must not silently end a worker: the row it held stays `sending` (an attempt that started
                # is settled as unconfirmed by the sweep, one that did not goes back to the queue).
                log.exception("sender: unexpected error in worker %s; going on in %.1fs", worker, backoff)
                stop.wait(backoff)
                backoff = min(backoff * 2, 5.0)
                continue
            if report is not None:
                if reports is not None:
                    reports.append(report)
                if activity is not None:
                    activity.row(report)
                continue
            if activity is not None:
                activity.idle(due)
            if once and (due is None or due > ONCE_HORIZON_S):
                break
            stop.wait(IDLE_POLL_S if due is None else min(max(due, 0.01), IDLE_POLL_S))
        if ledger is not None:
            self.give_back_claimed_ahead(ledger, worker)
            ledger.close()

    def run(self, ledger_factory: Callable[[], Ledger], workers: int = 1, *, once: bool = False,
            stop: threading.Event | None = None, activity: Activity | None = None) -> list[Report]:
        """Run `workers` threads on this host until stopped (or, with `once`, until nothing is due soon), telling
        `activity` what each row became."""
        stop = stop or threading.Event()
        with ledger_factory() as ledger:
            self.prepare(ledger)
        reports: list[Report] = []
        threads = [threading.Thread(target=self.work, args=(ledger_factory, i),
                                    kwargs={"once": once, "stop": stop, "reports": reports, "activity": activity},
                                    name=f"sender-{i}", daemon=True) for i in range(workers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            while thread.is_alive():
                thread.join(0.5)
        return reports
