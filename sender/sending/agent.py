"""The sender agent: claim a due row, check its sending window, reserve a mailbox, lease a source IP, check suppression,
submit, record.

Each step that takes something is undone in reverse when a later one fails. No transaction or lock is held across
the SMTP conversation: every ledger call is one database function. The attempt's durable start (with the last
suppression check) and the opening of the SMTP session (connect, TLS, AUTH) run side by side; nothing is handed
over (MAIL FROM) until both are done, so a suppressed or lost row only costs a QUIT. `checkpoint(name)` is called
after each step (fault-injection tests SIGKILL the process there): claimed, reserved, leased, attempt_started,
submitted, recorded. A send's record claims the worker's next row in the same round trip (a killed agent leaves
that row `sending` without an attempt: the sweep requeues it); a stopping worker gives it back.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime

from ippool import Lease, Pool
from sender.campaigns.template import TemplateError
from sender.errors import LedgerUnavailable
from sender.ledger.history import make_partitions
from sender.ledger.store import Claimed, Ledger, Settle
from sender.oauth import TokenKeeper, TokenUnavailable
from sender.oauth.opening import open_refreshing
from sender.sending.compose import compose
from sender.sending.counters import rebuild
from sender.sending.guard_settings import GuardSettings
from sender.sending.message import build_message, message_id_for, unsubscribe_url
from sender.sending.outcomes import blamed_but_kept, decide
from sender.sending.submission import Result, ResultKind, Stage, SubmissionSession
from sender.sending.tokens import make_token
from sender.sending.windows import Windows
from sender.settings import AgentSettings
from sendhost.errors import SecretUnavailable
from sendhost.model import Mailbox
from warmup import FailureClass, Guard, Picker, Reservation
from warmup.errors import UnknownMailbox, WarmupConfigError, WarmupUnavailable

log = logging.getLogger("sendhost.sender")

CHECKPOINTS = ("claimed", "reserved", "leased", "attempt_started", "submitted", "recorded")
ONCE_HORIZON_S = 60.0  # --once waits out blocks up to this long, then leaves the rest for a later run
UNAVAILABLE_DELAY_S = 5.0
PAUSED_DELAY_S = 300.0
SWEEP_EVERY_S = 60.0
# the history's months are made two months ahead (sender.ledger.history): at the start, then once a day
PARTITIONS_EVERY_S = 86400.0
PERSIST_FOR_S = 600.0  # how long a worker keeps trying to write a send it made before leaving it to sweep
IDLE_POLL_S = 1.0


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


@dataclass(frozen=True)
class Report:
    """What one pass of the send path did to one row."""

    row: int
    kind: str  # sent | unconfirmed | retry | failed | suppressed | rerouted | blocked | lost | crash
    detail: str = ""
    mailbox: str | None = None
    source_ip: str | None = None
    unreachable: bool = False  # the submission server could not be reached or its certificate did not verify
    message_id: str | None = None  # the row's fixed Message-ID, once its attempt started
    login_failed: bool = False  # the submission server refused our login, offered none, or dropped us during it


def _close(opening: Future[SubmissionSession | Result]) -> None:
    """Wait for a session being opened and end it without handing anything over."""
    session = opening.result()
    if isinstance(session, SubmissionSession):
        session.close()


class Agent:
    """The send path for one host. Share one Agent between worker threads; give each its own Ledger."""

    def __init__(self, settings: AgentSettings, guard: Guard, pool: Pool, *,
                 unsubscribe_key: bytes, checkpoint: Callable[[str], None] | None = None,
                 env: Mapping[str, str] | None = None, sleep: Callable[[float], None] = time.sleep,
                 side_tasks: Executor | None = None, clock: Callable[[], float] = time.time,
                 pick: Picker | None = None,
                 source_address: Callable[[Lease], str | None] | None = None,
                 mailbox_settings: Callable[[], Sequence[Mailbox]] | None = None,
                 tokens: TokenKeeper | None = None) -> None:
        """`clock` (epoch seconds) is the time of the counter rebuild; give the guard the same one. `pick` reserves
        a mailbox among a group's (default `guard.pick`); `source_address` is the address a lease's send binds to
        (default the lease's `source_ip`). The simulation passes both (sender.assembly builds it).
        `mailbox_settings` reads the inventory's mailboxes as they are now, whose warm-up settings reach the guard
        at the start and each sweep cycle (default: those of `settings`, read once). `tokens` keeps the OAuth
        mailboxes' access tokens (default: one that pauses a mailbox whose grant is refused)."""
        self.settings = settings
        self.guard = guard
        self.pool = pool
        self._key = unsubscribe_key
        self._checkpoint = checkpoint or (lambda name: None)
        self._env = env
        self._tokens = tokens or TokenKeeper(env=env, on_refused=guard.pause)
        self._sleep = sleep
        self._clock = clock
        self._pick: Picker = pick or guard.pick
        self._source_address = source_address or (lambda lease: lease.source_ip)
        self._groups = settings.by_group()
        self._addresses = {g: tuple(m.address.lower() for m in ms) for g, ms in self._groups.items()}
        self._mailboxes = {m.address.lower(): m for m in settings.mailboxes}
        self._all_addresses = sorted(self._mailboxes)
        self.worker_prefix = f"{socket.gethostname()}:{os.getpid()}"
        # Threads for work beside a send: opening its SMTP session, settling its lease and reservation. The
        # simulation passes an inline executor: one thread on its simulated clock, the same order every run.
        self._side_tasks = side_tasks or ThreadPoolExecutor(max_workers=64, thread_name_prefix="sender-side")
        # worker -> the row its last send's record claimed in the same round trip (Agent._record), sent next
        self._claimed_ahead: dict[str, Claimed] = {}
        self._windows = Windows()
        self._guard_settings = GuardSettings(mailbox_settings or (lambda: settings.mailboxes), self._mailboxes)

    @property
    def groups(self) -> list[str]:
        return sorted(self._groups)

    def prepare(self, ledger: Ledger) -> None:
        """Rebuild every group's warm-up counters from the ledger (at start: Redis may have lost them)."""
        for group, mailboxes in self._groups.items():
            rebuild(self.guard, ledger, group, mailboxes, clock=self._clock)
        self._guard_settings.cycle(self.guard)  # an inventory edited while no agent ran

    # --- one row ------------------------------------------------------------------------------------------------

    def send_one(self, ledger: Ledger, worker: str) -> Report | None:
        """Claim one due row and take it through the send path; None when no row is due."""
        ahead = self._claimed_ahead.pop(worker, None)
        claimed = [ahead] if ahead is not None else ledger.claim(worker, 1, self.groups, self._all_addresses)
        if not claimed:
            return None
        row = claimed[0]
        self._checkpoint("claimed")
        if row.attempt_id is not None:
            # An earlier attempt started and nobody knows how it ended: finish the writes, never send.
            status = self._persist(ledger, lambda: ledger.settle(row.id, Settle.UNCONFIRMED,
                                                                 "redelivered after an attempt had started"))
            return Report(row.id, "crash", f"settled as {status}")
        now = datetime.fromtimestamp(self._clock(), UTC)
        closed = self._windows.closed(ledger, row, now)
        if closed is not None:
            # Outside the lead's sending window: back to the queue until it opens, before any mailbox is reserved.
            ledger.unclaim(row.id, closed.delay_s, closed.why)
            return Report(row.id, "blocked", closed.why)
        url = unsubscribe_url(self.settings.unsubscribe_base_url, make_token(self._key, row.idempotency_key))
        try:
            content = compose(row, url, self._windows.tracking(ledger, row), self._key)
        except (TemplateError, ValueError) as exc:  # a lead that cannot fill its step: nothing can be sent
            why = f"cannot compose: {exc}"
            status = self._persist(ledger, lambda: ledger.settle(row.id, Settle.FAILED, why))
            return Report(row.id, str(status), why)
        reserved = self._reserve(ledger, row, now)
        if isinstance(reserved, Report):
            return reserved
        reservation: Reservation | None = reserved
        self._checkpoint("reserved")
        lease: Lease | None = None
        confirm: Reservation | None = None  # the reservation of a message the server accepted
        attempt_started = False
        try:
            lease = self.pool.lease(self.settings.host, ttl_s=self.settings.lease_ttl,
                                    primary_ip=self.settings.primary_ip)
            self._checkpoint("leased")
            source_ip = self._source_address(lease)
            mailbox = self._mailboxes[reserved.mailbox]
            server = mailbox.smtp
            assert server is not None  # AgentSettings holds only mailboxes that submit
            try:
                secret = self._tokens.secret(server.credential)
            except TokenUnavailable as exc:
                # Nothing attempted, nothing failed: the row waits (a refused grant paused the mailbox, so another
                # one takes it; an unreachable token endpoint is retried later) and the mailbox stays connected.
                self.guard.cancel(reserved)
                reservation = None
                ledger.unclaim(row.id, exc.delay_s, f"mailbox {mailbox.address}: {exc}")
                return Report(row.id, "blocked", str(exc), mailbox.address, login_failed=exc.refused)
            except SecretUnavailable as exc:
                log.error("sender: mailbox %s cannot authenticate: %s", mailbox.address, exc)
                self.guard.cancel(reserved, FailureClass.ACCOUNT_AUTH)
                reservation = None
                ledger.unclaim(row.id, 0.0, f"mailbox {mailbox.address}: {exc}")
                return Report(row.id, "rerouted", str(exc), mailbox.address)
            # The durable start of the attempt (with the last suppression check) and the opening of the SMTP
            # session (connect, TLS, AUTH: nothing handed over yet) run side by side; MAIL FROM waits for both.
            opening = self._side_tasks.submit(open_refreshing, self._tokens, server, secret, source_ip=source_ip,
                                              timeout_s=self.settings.smtp_timeout_s)
            try:
                outcome, message_id = ledger.begin_attempt(
                    row.id, uuid.uuid4(), mailbox.address, source_ip,
                    message_id_for(row.idempotency_key, mailbox.address), content.headers.subject)
            except BaseException:
                _close(opening)
                raise
            if outcome != "ok" or message_id is None:
                _close(opening)
                self.guard.cancel(reserved)
                reservation = None
                kind = {"suppressed": "suppressed", "ended": "cancelled"}.get(outcome, "lost")
                return Report(row.id, kind, outcome, mailbox.address)
            attempt_started = True
            self._checkpoint("attempt_started")
            session = opening.result()
            result = session if isinstance(session, Result) else session.hand_over(
                build_message(mailbox=mailbox.address, to=row.recipient, subject=content.headers, text=content.body,
                              message_id=message_id, unsubscribe=url, now=now, open_image=content.open_image),
                row.recipient)
            self._checkpoint("submitted")
            report = self._settle(ledger, row, reserved, mailbox, source_ip, result, message_id, lease, worker)
            if result.kind is ResultKind.ACCEPTED:
                confirm = reserved
            return report
        except BaseException:
            # Undo in reverse. A started attempt is never undone: the reservation stays used and the row stays
            # `sending` for the sweep to settle as unconfirmed (the server may have the message).
            if reservation is not None and not attempt_started:
                self.guard.cancel(reservation)
                # if the ledger is down too, the sweep requeues it: its attempt never started
                with contextlib.suppress(LedgerUnavailable):
                    ledger.unclaim(row.id, 0.0, "the send path failed before the attempt")
            raise
        finally:
            if lease is not None:
                # Off the hot path, in one side task: neither step fails the send (a lost release expires by its
                # TTL; confirm only settles a reservation that already counts against the cap), and neither
                # may delay the next claim.
                self._side_tasks.submit(self._finish, lease, confirm)

    def _reserve(self, ledger: Ledger, row: Claimed, now: datetime) -> Reservation | Report:
        pace = self._windows.pace(ledger, row, now)  # the campaign's slot, taken with the mailbox's; the spread
        addresses = self._addresses.get(row.group)
        if row.pinned_mailbox is not None:
            # A later step goes from the mailbox that sent the lead's previous one, or waits for it.
            addresses = (row.pinned_mailbox,) if row.pinned_mailbox in self._mailboxes else ()
            if not addresses:  # the claim filters on our mailboxes: only a changed inventory gets here
                why = f"waiting for mailbox {row.pinned_mailbox}, which this agent does not send from"
                ledger.unclaim(row.id, PAUSED_DELAY_S, why)
                return Report(row.id, "blocked", why)
        if not addresses:  # the claim filters on our groups: only a changed inventory gets here
            ledger.unclaim(row.id, PAUSED_DELAY_S, f"no mailbox of group {row.group} on this agent")
            return Report(row.id, "blocked", f"no mailbox in group {row.group}")
        try:
            decision = self._pick(addresses, campaign=pace.campaign, window_left_s=pace.window_left_s)
        except WarmupConfigError as exc:
            if not isinstance(exc, UnknownMailbox):
                ledger.unclaim(row.id, PAUSED_DELAY_S, str(exc))
                return Report(row.id, "blocked", str(exc))
            # Redis lost the group's mailboxes: rebuild from the ledger before reserving anything.
            try:
                rebuild(self.guard, ledger, row.group, self._groups[row.group], clock=self._clock)
            except WarmupUnavailable as unavailable:
                ledger.unclaim(row.id, UNAVAILABLE_DELAY_S, "")
                return Report(row.id, "blocked", str(unavailable))
            except WarmupConfigError as wrong:  # e.g. a start date in the future
                ledger.unclaim(row.id, PAUSED_DELAY_S, str(wrong))
                return Report(row.id, "blocked", str(wrong))
            decision = self._pick(addresses, campaign=pace.campaign, window_left_s=pace.window_left_s)
        if decision.reserved and decision.reservation is not None:
            return decision.reservation
        if decision.status == "skipped-unavailable":
            delay = UNAVAILABLE_DELAY_S
        elif decision.retry_after_s is None:
            delay = PAUSED_DELAY_S
        else:
            delay = max(decision.retry_after_s, 0.0)
        ledger.unclaim(row.id, delay, "")
        return Report(row.id, "blocked", f"{decision.status} ({decision.reason or ''}) for {delay:.0f}s")

    def _settle(self, ledger: Ledger, row: Claimed, reservation: Reservation, mailbox: Mailbox,
                source_ip: str | None, result: Result, message_id: str | None = None,
                lease: Lease | None = None, worker: str | None = None) -> Report:
        outcome = decide(result, self.settings.retry_delay_s)
        # Before the row goes back: its next claim must not lease the blamed address again. When that cannot be
        # (the host's primary address, Redis down) it waits as a retry does, or it would go straight back to it.
        if outcome.retire_source and (lease is None or not self.pool.retire_blamed(lease)):
            outcome = blamed_but_kept(result, self.settings.retry_delay_s)
        if outcome.settle is None:
            self._record(ledger, row, result.text, worker)
            self._checkpoint("recorded")
            return Report(row.id, "sent", result.text, mailbox.address, source_ip,
                          message_id=message_id)
        settle = outcome.settle
        status = self._persist(ledger, lambda: ledger.settle(row.id, settle, outcome.detail, outcome.delay_s))
        if not outcome.keep_reservation:
            self.guard.cancel(reservation, outcome.failure)
        if outcome.failure is not None and outcome.failure is not FailureClass.RECIPIENT:
            log.warning("sender: %s via %s: %s", row.recipient, mailbox.address, outcome.detail)
        kind = "rerouted" if outcome.settle is Settle.REROUTE else str(status)
        unreachable = result.kind is ResultKind.CERTIFICATE or (result.kind is ResultKind.NO_REPLY
                                                          and result.stage in (Stage.CONNECT, Stage.TLS))
        return Report(row.id, kind, outcome.detail, mailbox.address, source_ip, unreachable,
                      login_failed=result.stage is Stage.AUTH)

    def _record(self, ledger: Ledger, row: Claimed, reply: str, worker: str | None) -> None:
        """Record the send and, in the same round trip, claim `worker`'s next row (kept for its next send_one).
        The record never depends on the claim: if the pair fails for any reason, the record alone is retried."""
        if worker is not None:
            try:
                _recorded, ahead = ledger.record_sent_and_claim(row.id, reply, worker, self.groups,
                                                                self._all_addresses)
            except Exception as exc:  # whatever undid the pair (it is one transaction), the record goes on alone
                log.warning("sender: recording with the next claim failed, recording alone: %s", exc)
            else:
                if ahead is not None:
                    self._claimed_ahead[worker] = ahead
                return
        self._persist(ledger, lambda: ledger.record_sent(row.id, reply))

    def give_back_claimed_ahead(self, ledger: Ledger, worker: str) -> None:
        """A stopping worker's row claimed ahead goes back to the queue now (else the sweep requeues it later)."""
        ahead = self._claimed_ahead.pop(worker, None)
        if ahead is not None:
            with contextlib.suppress(LedgerUnavailable):
                ledger.unclaim(ahead.id, 0.0, "the agent stopped before sending it")

    def _finish(self, lease: Lease, sent: Reservation | None) -> None:
        """After a send, beside the next one: confirm the reservation of an accepted message, release the lease."""
        try:
            if sent is not None:
                self.guard.confirm(sent)
        finally:
            lease.release()

    def _persist(self, ledger: Ledger, write: Callable[[], object]) -> object:
        """Write what already happened, through a database restart: reconnect and retry for a while."""
        deadline = time.monotonic() + PERSIST_FOR_S
        delay = 0.1
        while True:
            try:
                return write()
            except LedgerUnavailable as exc:
                if time.monotonic() > deadline:
                    raise
                log.warning("sender: ledger write failed, retrying: %s", exc)
                self._sleep(delay)
                delay = min(delay * 2, 5.0)
                with contextlib.suppress(LedgerUnavailable):
                    ledger.reconnect()

    # --- the loop -----------------------------------------------------------------------------------------------

    def work(self, ledger_factory: Callable[[], Ledger], index: int, *, once: bool, stop: threading.Event,
             reports: list[Report] | None = None) -> None:
        """One worker: send until `stop` (or, with `once`, until nothing is due within a minute)."""
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
                    last_partitions = time.monotonic()
                if index == 0 and time.monotonic() - last_sweep >= SWEEP_EVERY_S:
                    requeued, unconfirmed = ledger.sweep(self.settings.sweep_after_s)
                    if requeued or unconfirmed:
                        log.warning("sender: sweep requeued %d and settled %d as unconfirmed", requeued,
                                    unconfirmed)
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
                continue
            if once and (due is None or due > ONCE_HORIZON_S):
                break
            stop.wait(IDLE_POLL_S if due is None else min(max(due, 0.01), IDLE_POLL_S))
        if ledger is not None:
            self.give_back_claimed_ahead(ledger, worker)
            ledger.close()

    def run(self, ledger_factory: Callable[[], Ledger], workers: int = 1, *, once: bool = False,
            stop: threading.Event | None = None) -> list[Report]:
        """Run `workers` threads on this host until stopped (or, with `once`, until nothing is due soon)."""
        stop = stop or threading.Event()
        with ledger_factory() as ledger:
            self.prepare(ledger)
        reports: list[Report] = []
        threads = [threading.Thread(target=self.work, args=(ledger_factory, i),
                                    kwargs={"once": once, "stop": stop, "reports": reports},
                                    name=f"sender-{i}", daemon=True) for i in range(workers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            while thread.is_alive():
                thread.join(0.5)
        return reports
