"""The send guard: one Lua script per reservation, enforced across every sender process by Redis.

    guard = Guard.from_url("redis://...")          # embedded Redis when the URL is None
    guard.add_mailbox("a@x.com", start=date(2026, 11, 30))   # gap, jitter, group: sendhost.model's defaults
    d = guard.reserve("a@x.com")                   # or guard.pick([...]): least-used eligible mailbox
    if d.reserved: ... send ...; guard.confirm(d.reservation)   # or guard.cancel(d.reservation, failure=...)

Redis errors on the hot path fail closed (`skipped-unavailable`) unless the guard was built with
`fail_open=True`; when we don't know whether a send is allowed we under-send.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import date, datetime
from enum import StrEnum
from pathlib import Path
from typing import Protocol, TypeVar

import redis

from sendhost import redis_conn
from sendhost.lua_errors import LibraryMissing
from sendhost.masking import mask_text
from sendhost.model import DEFAULT_GROUP, DEFAULT_TIMEZONE, JITTER_S, MIN_GAP_S, Mailbox
from warmup import keys
from warmup.campaign_counts import campaign_counts
from warmup.campaign_restore import restore_campaign
from warmup.errors import UnknownMailbox, WarmupConfigError, WarmupUnavailable
from warmup.failures import FailureClass
from warmup.mailboxes import (
    MailboxConfig,
    Mailboxes,
    MailboxStatus,
    SpamRecord,
    validate_address,
    validate_group,
)
from warmup.schedule import DayCap, Ramp
from warmup.scripts import GuardScripts

log = logging.getLogger("sendhost.warmup")
T = TypeVar("T")
DEFAULT_RAMP = Ramp()



class Answer(StrEnum):
    """The guard's answer to a reservation (`Decision.status`): reserved, or why not (the reserve script's words)."""

    RESERVED = "reserved"
    SKIPPED_PAUSED = "skipped-paused"
    SKIPPED_COOLDOWN = "skipped-cooldown"
    SKIPPED_DAILY_LIMIT = "skipped-daily-limit"
    SKIPPED_NOT_STARTED = "skipped-not-started"
    SKIPPED_CAMPAIGN_CAP = "skipped-campaign-cap"
    SKIPPED_UNAVAILABLE = "skipped-unavailable"

REBUILD_LOCK_S = 30.0  # how long a rebuild lock lives, and is waited for, when its holder died
CALL_PLAN_CACHE = 1024
# Settled tokens are remembered this long: far longer than a send can stay in flight.
SETTLED_KEEP_MS = 2 * 86_400_000
GUARD_ACTIONS = {
    FailureClass.ACCOUNT_QUOTA: "park-day",
    FailureClass.RATE_LIMITED: "cool-down",
    FailureClass.ACCOUNT_AUTH: "disconnect",
}


@dataclass(frozen=True)
class BreakerPolicy:
    """Per-inbox circuit breaker: `failures` in `window_s` trip it, but only while the whole system had at
    least `min_system_successes` confirmed sends in that window; `trips_to_disconnect` trips in a day pause it."""

    failures: int = 5
    window_s: int = 1800
    min_system_successes: int = 10
    open_s: int = 1800
    trips_to_disconnect: int = 2


@dataclass(frozen=True)
class CampaignSlot:
    """The campaign a send is for, as a reservation counts it: its `day` (ISO date in the campaign's time zone),
    its daily `cap` and each mailbox's share of it per day (`per_mailbox`; None: no limit, only counted), and
    when that day ends (`day_ends_ms`, epoch ms: when a full campaign may send again)."""

    name: str
    day: str
    cap: int | None
    per_mailbox: int | None
    day_ends_ms: int


@dataclass(frozen=True)
class Reservation:
    """A reserved send. `unguarded` is True only for fail-open reservations made while Redis was down.
    `campaign` and `campaign_day`: the campaign slot taken with it (None: none), freed with it by `cancel`."""

    token: str
    mailbox: str
    group: str
    day: str
    count: int
    cap: int
    at_ms: int
    unguarded: bool = False
    campaign: str | None = None
    campaign_day: str | None = None


@dataclass(frozen=True)
class Decision:
    status: Answer
    mailbox: str | None
    reservation: Reservation | None = None
    retry_after_s: float | None = None  # None with skipped-paused: until resumed
    reason: str | None = None

    @property
    def reserved(self) -> bool:
        return self.status is Answer.RESERVED


@dataclass(frozen=True)
class CancelOutcome:
    """What `cancel` did: whether it settled the reservation (False: already settled), freed the slot,
    tripped the breaker."""

    failure: FailureClass | None
    settled: bool
    freed: bool
    failures_in_window: int
    tripped: bool
    disconnected: bool
    applied: bool = True  # False when Redis was unreachable: nothing changed, the slot stays used


class Picker(Protocol):
    """What reserves a send among a group's mailboxes: `Guard.pick`, or a hook around it (the simulation's)."""

    def __call__(self, addresses: Sequence[str], /, *, campaign: CampaignSlot | None = None,
                 window_left_s: float | None = None) -> Decision: ...


class Guard:
    """Reserve sends for mailboxes within their daily cap and minimum gap, atomically across processes."""

    def __init__(self, client: redis.Redis, *, clock: Callable[[], float] | None = None, fail_open: bool = False,
                 breaker: BreakerPolicy = BreakerPolicy(), cooldown_s: int = 4 * 3600,
                 new_seed: Callable[[], str] | None = None) -> None:
        """`clock` (epoch seconds) is the time of every call not given a `now`; without it, Redis TIME."""
        self._client = client
        self._clock = clock
        self._scripts = GuardScripts.register(client)
        self.fail_open = fail_open
        self.breaker = breaker
        self.cooldown_s = cooldown_s
        self.mailboxes = Mailboxes(client, self._scripts, new_seed) if new_seed else Mailboxes(client, self._scripts)
        self._call_plans: dict[tuple[str, ...], tuple[list[str], keys.GroupKeys, list[str]]] = {}

    @classmethod
    def from_url(cls, url: str | None, *, state_dir: Path = redis_conn.DEFAULT_STATE_DIR,
                 socket_timeout: float = redis_conn.DEFAULT_SOCKET_TIMEOUT_S, fail_open: bool = False,
                 breaker: BreakerPolicy = BreakerPolicy()) -> Guard:
        """A guard on `url`, or on the embedded Redis under `state_dir` when `url` is None. A URL ending in
        `?cluster=yes` (any one node's address) opens a Redis Cluster client (`sendhost.redis_conn.connect`), as
        `Pool.from_url` does: WarmupUnavailable when no node answers, RedisRefused when it refuses the user."""
        try:
            # The hot-path role: one retry without backoff, so a sender hears "unavailable" within a timeout.
            client = redis_conn.connect(url, role=redis_conn.HOT_PATH, state_dir=state_dir,
                                        socket_timeout=socket_timeout)
        except ValueError as exc:
            raise WarmupConfigError(str(exc)) from None
        except redis_conn.RedisUnavailable as exc:  # a Redis Cluster's slot map is read as its client is built
            raise WarmupUnavailable(str(exc)) from None
        return cls(client, fail_open=fail_open, breaker=breaker)

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> Guard:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- mailboxes -------------------------------------------------------------------------------------------

    def add_mailbox(self, address: str, *, start: date, min_gap_s: float = MIN_GAP_S,
                    jitter_s: tuple[float, float] = JITTER_S, group: str = DEFAULT_GROUP,
                    timezone: str = DEFAULT_TIMEZONE, domain: str | None = None, ramp: Ramp = DEFAULT_RAMP,
                    now: float | None = None, force: bool = False, paused: str | None = None) -> bool:
        """Put a mailbox under the guard (or update its settings, keeping today's counters); True if new.

        The start may be in the future: the mailbox reserves nothing until then (`skipped-not-started`).
        Moving the start earlier out of week one today needs `force`. `paused` (a reason) adds it paused: it
        reserves nothing until `resume`, not even once between the add and a pause."""
        address = validate_address(address)
        mailbox = Mailbox(address, domain or address.split("@", 1)[1], start, timezone, group, min_gap_s, jitter_s)
        config = MailboxConfig.of(mailbox, ramp)
        return self._admin(lambda: self.mailboxes.add(config, self.mailboxes.now_ms(self._now(now)), force=force,
                                                      paused=paused))

    @contextmanager
    def rebuilding(self, group: str, *, wait_s: float = REBUILD_LOCK_S,
                   sleep: Callable[[float], None] = time.sleep) -> Iterator[None]:
        """Hold `group`'s rebuild lock while its counters are restored from an outside record (the sender's
        ledger), so two processes do not rebuild at once. A holder that died is waited for at most `wait_s`,
        then overruled: a rebuild only ever raises counters."""
        lock = keys.GroupKeys(validate_group(group)).rebuild_lock
        token = uuid.uuid4().hex
        deadline = time.monotonic() + wait_s
        while not self._admin(lambda: self._client.set(lock, token, nx=True, px=int(wait_s * 1000))):
            if time.monotonic() > deadline:
                break
            sleep(0.05)
        try:
            yield
        finally:
            if self._admin(lambda: self._client.get(lock)) == token:
                self._admin(lambda: self._client.delete(lock))

    def knows(self, address: str) -> bool:
        """Is `address` under the guard already?"""
        address = validate_address(address)
        return self._admin(lambda: self.mailboxes.exists(address))

    def pause(self, address: str, reason: str = "paused by hand") -> None:
        address = validate_address(address)
        self._admin(lambda: self.mailboxes.pause(address, reason))

    def resume(self, address: str, now: float | None = None) -> None:
        """Clear a pause, a hold, the breaker and a placement rest (its ramp whole again)."""
        address = validate_address(address)
        self._admin(lambda: self.mailboxes.resume(address, self.mailboxes.now_ms(self._now(now))))

    def rest(self, address: str, reason: str, now: float | None = None) -> None:
        """Halve the mailbox's ramp from today (a placement test's rest), until `lift_rest` or `resume`."""
        address = validate_address(address)
        self._admin(lambda: self.mailboxes.rest(address, reason, self.mailboxes.now_ms(self._now(now))))

    def lift_rest(self, address: str, now: float | None = None) -> None:
        address = validate_address(address)
        self._admin(lambda: self.mailboxes.lift_rest(address, self.mailboxes.now_ms(self._now(now))))

    def rest_lifted(self, address: str) -> bool:
        """Did `resume` (a person) lift the mailbox's placement rest since it was last rested?"""
        address = validate_address(address)
        return self._admin(lambda: self.mailboxes.rest_lifted(address))

    def rest_reason(self, address: str) -> str | None:
        """Why the mailbox's ramp is halved (a placement rest), or None."""
        address = validate_address(address)
        return self._admin(lambda: self.mailboxes.rest_reason(address))

    def record_spam_rate(self, rate: float, day: date, *, domain: str | None = None, mailbox: str | None = None,
                         now: float | None = None) -> SpamRecord:
        """Record a day's spam rate (a fraction) for a domain or a mailbox; >= 0.3% pauses what it covers."""
        if mailbox is not None:
            mailbox = validate_address(mailbox)
        return self._admin(lambda: self.mailboxes.record_spam_rate(
            rate, day, self.mailboxes.now_ms(self._now(now)), domain=domain.lower() if domain else None,
            mailbox=mailbox))

    def spam_rates(self, domain: str) -> dict[date, float]:
        """The spam rates recorded for `domain`, per day (what `record_spam_rate` wrote, by hand or from Postmaster
        Tools); empty when none are, or Redis lost them."""
        found = self._admin(lambda: self._client.hgetall(keys.domain_health(domain.lower())))
        return {date.fromisoformat(str(day)): float(rate) for day, rate in found.items()}

    def status(self, addresses: Iterable[str] | None = None, now: float | None = None) -> list[MailboxStatus]:
        def read() -> list[MailboxStatus]:
            wanted = [validate_address(a) for a in addresses] if addresses else self.mailboxes.addresses()
            now_ms = self.mailboxes.now_ms(self._now(now))
            return [self.mailboxes.status(a, now_ms, self.breaker.window_s * 1000) for a in wanted]
        return self._admin(read)

    def campaign_counts(self, group: str, name: str, day: str) -> tuple[int, dict[str, int]]:
        """Campaign `name`'s reservations on its local `day` (ISO date) and each mailbox's share of them."""
        group = validate_group(group)
        return self._admin(lambda: campaign_counts(self._client, group, name, day))

    def settings(self, address: str) -> MailboxConfig:
        """The warm-up settings the guard holds for `address` (UnknownMailbox when it holds none)."""
        address = validate_address(address)
        return self._admin(lambda: self.mailboxes.config(address))

    def plan(self, address: str, days: int) -> list[DayCap]:
        address = validate_address(address)
        return self._admin(lambda: self.mailboxes.plan(address, days))

    def import_sends(self, sends: Iterable[tuple[str, datetime]],
                     now: float | None = None) -> dict[str, tuple[int, int]]:
        """Rebuild today's counters from the sender's own log: raise, never lower, each mailbox's count."""
        return self._admin(lambda: self.mailboxes.import_sends(sends, self.mailboxes.now_ms(self._now(now))))

    def import_campaign_sends(self, group: str, name: str, timezone: str, sends: Iterable[tuple[str, datetime]],
                              now: float | None = None) -> int:
        """Rebuild campaign `name`'s counters on its day (in `timezone`) from the sender's own log of its
        (mailbox, when) sends: raise, never lower, the day's count and each mailbox's share; the day's count."""
        group = validate_group(group)
        return self._admin(lambda: restore_campaign(self._scripts, group, name, timezone, sends,
                                                    self.mailboxes.now_ms(self._now(now))))

    def _now(self, now: float | None) -> float | None:
        """`now`, else the clock's time; None (Redis TIME) when the guard has no clock."""
        if now is None and self._clock is not None:
            return self._clock()
        return now

    def _admin(self, operation: Callable[[], T]) -> T:
        try:
            return operation()
        except LibraryMissing as exc:  # Redis answers, but without our functions: say what reloads them
            raise WarmupUnavailable(str(exc)) from None
        except redis_conn.REFUSALS as exc:  # a wrong password is configuration (exit 2), not an outage
            raise redis_conn.RedisRefused(redis_conn.refused_message(exc, self._client)) from None
        except redis_conn.FAILURES as exc:
            source = redis_conn.url_source(self._client)
            raise WarmupUnavailable(f"Redis unreachable: {mask_text(str(exc))}; check the Redis URL"
                                    f"{f' from {source}' if source else ' (--redis-url, SENDHOST_REDIS_URL)'}") \
                from None

    # --- the hot path ----------------------------------------------------------------------------------------

    def reserve(self, address: str, now: float | None = None) -> Decision:
        """Reserve one send for `address` if it is within its cap and gap and not paused."""
        return self.pick((address,), now=now)

    def pick(self, addresses: Sequence[str], now: float | None = None, *, campaign: CampaignSlot | None = None,
             window_left_s: float | None = None) -> Decision:
        """Reserve on the least-used eligible mailbox of `addresses` (one group), in one script. With `campaign`,
        the campaign's slot is reserved in the same script (`skipped-campaign-cap` when its day is full; a mailbox
        at its share of it is skipped). With `window_left_s` (the open time left in the send's window today), the
        mailbox's next send is paced to spread its remaining cap over it (docs/campaigns.md#pace)."""
        if not addresses:
            raise WarmupConfigError("pick needs at least one mailbox")
        try:
            return self._pick(addresses, self._now(now), campaign, window_left_s)
        except redis_conn.FAILURES as exc:
            log.warning("warmup guard: Redis error, failing %s: %s", "open" if self.fail_open else "closed", exc)
            if self.fail_open:
                first = addresses[0].lower()
                reservation = Reservation(token="", mailbox=first, group="", day="", count=0, cap=0,
                                          at_ms=0, unguarded=True)
                return Decision(Answer.RESERVED, first, reservation, reason=f"fail-open: {exc}")
            return Decision(Answer.SKIPPED_UNAVAILABLE, None, retry_after_s=None, reason=str(exc))

    def _call_plan(self, addresses: Sequence[str]) -> tuple[list[str], keys.GroupKeys, list[str]]:
        """Validated addresses, their group and the script's KEYS; cached, since a sender asks for the same
        mailboxes again and again and this is the hot path."""
        cache_key = addresses if isinstance(addresses, tuple) else tuple(addresses)
        plan = self._call_plans.get(cache_key)
        if plan is None:
            wanted = [validate_address(a) for a in addresses]
            groups = {self.mailboxes.group_of(a) for a in wanted}
            if len(groups) > 1:
                raise WarmupConfigError(f"pick across groups {sorted(groups)}: pick among one group's mailboxes")
            group_keys = keys.GroupKeys(groups.pop())
            script_keys: list[str] = []
            for address in wanted:
                mailbox = group_keys.mailbox(address)
                script_keys += [mailbox.state, mailbox.schedule]
            if len(self._call_plans) >= CALL_PLAN_CACHE:
                self._call_plans.clear()
            plan = self._call_plans[cache_key] = (wanted, group_keys, script_keys)
        return plan

    def _pick(self, addresses: Sequence[str], now: float | None, campaign: CampaignSlot | None = None,
              window_left_s: float | None = None) -> Decision:
        wanted, group_keys, script_keys = self._call_plan(addresses)
        args: list[str | int] = [] if now is None else [int(now * 1000)]
        if campaign is not None or window_left_s is not None:
            args = [self._now_arg(now), "" if window_left_s is None else int(window_left_s * 1000)]
        if campaign is not None:
            script_keys = [*script_keys, group_keys.campaign(campaign.name)]
            args += [campaign.day, _optional(campaign.cap), _optional(campaign.per_mailbox), campaign.day_ends_ms]
        for _attempt in range(3):
            kind, index, *rest = self._scripts.reserve(keys=script_keys, args=args).split("\t")
            if kind == "stale":
                # Today is past the written schedule (or the mailbox was never planned): extend it and retry.
                now_ms = self.mailboxes.now_ms(now)
                for stale in (index, *rest):
                    self.mailboxes.refresh_schedule(wanted[int(stale) - 1], now_ms)
                continue
            if kind == "skipped-campaign-cap":
                retry_ms, _now, reason = rest[0], rest[1], "\t".join(rest[2:])
                return Decision(Answer.SKIPPED_CAMPAIGN_CAP, None, retry_after_s=int(retry_ms) / 1000,
                                reason=f"campaign {campaign.name if campaign else '?'}: {reason}")
            mailbox_address = wanted[int(index) - 1]
            if kind == "unknown":
                raise UnknownMailbox(mailbox_address, "add it first")
            if kind == "reserved":
                token, count, cap, at_ms = rest[:4]
                reservation = Reservation(token, mailbox_address, group_keys.group, token.split(":", 2)[1],
                                          int(count), int(cap), int(at_ms),
                                          campaign=campaign.name if campaign else None,
                                          campaign_day=campaign.day if campaign else None)
                return Decision(Answer.RESERVED, mailbox_address, reservation)
            retry_ms, _now, *reason_parts = rest
            reason = "\t".join(reason_parts)  # the reason comes last; a person may have typed a tab in it
            retry = None if int(retry_ms) < 0 else int(retry_ms) / 1000
            return Decision(Answer(kind), mailbox_address, retry_after_s=retry, reason=reason)
        raise WarmupConfigError(f"no schedule day covers now for {', '.join(wanted)}: is `now` before the "
                                "mailbox's start date?")

    def reservation_of(self, token: str) -> Reservation:
        """The reservation a token names (as `warmup reserve` printed it), to confirm or cancel it later."""
        parts = token.split(":", 2)
        if len(parts) != 3 or not parts[0].isdigit() or not parts[1]:
            raise WarmupConfigError(f"reservation {token!r} is not a token like 12:2026-11-30:alice@example.com "
                                    "(as `sendhost warmup reserve` prints it)")
        address = validate_address(parts[2])
        group = self._admin(lambda: self.mailboxes.group_of(address))
        return Reservation(token, address, group, parts[1], count=0, cap=0, at_ms=0)

    def confirm(self, reservation: Reservation, now: float | None = None) -> bool:
        """The send went out: settle the reservation and count a system-wide success for the breaker."""
        if reservation.unguarded:
            return False
        now = self._now(now)
        group_keys = keys.GroupKeys(reservation.group)
        mailbox = group_keys.mailbox(reservation.mailbox)
        try:
            # Two functions in one round trip: the success window is system-wide, so it lives on its own hash
            # tag and cannot share a call with the group's keys on Redis Cluster.
            settled, _ = self._scripts.call_all([
                (self._scripts.confirm, [group_keys.settled, mailbox.state],
                 [self._now_arg(now), reservation.token, SETTLED_KEEP_MS]),
                (self._scripts.successes, [keys.SYSTEM_SUCCESSES],
                 [self._now_arg(now), reservation.token, self.breaker.window_s * 1000]),
            ])
        except redis_conn.FAILURES as exc:
            log.warning("warmup guard: confirm of %s not recorded: %s", reservation.token, exc)
            return False
        return bool(settled)

    def cancel(self, reservation: Reservation, failure: FailureClass | None = None,
               now: float | None = None) -> CancelOutcome:
        """The send failed. No `failure`: it was never attempted, the slot is freed. Otherwise the class's
        response applies (see `FailureClass.response`). An unknown outcome should not be cancelled at all."""
        if reservation.unguarded:
            return CancelOutcome(failure, settled=False, freed=False, failures_in_window=0, tripped=False,
                                 disconnected=False, applied=False)
        response = failure.response if failure else None
        now = self._now(now)
        group_keys = keys.GroupKeys(reservation.group)
        mailbox = group_keys.mailbox(reservation.mailbox)
        window_ms = self.breaker.window_s * 1000
        try:
            successes = 0
            if response and response.counts_for_breaker:
                successes = int(self._scripts.successes(keys=[keys.SYSTEM_SUCCESSES],
                                                        args=[self._now_arg(now), "", window_ms]))
            cancel_keys = [group_keys.settled, mailbox.state, mailbox.schedule, mailbox.failures]
            cancel_args = [self._now_arg(now), reservation.token, 1 if response is None or response.frees_slot else 0,
                           GUARD_ACTIONS.get(failure, "none") if failure else "none", self._reason(failure),
                           1 if response and response.counts_for_breaker else 0, successes, self.breaker.failures,
                           window_ms, self.breaker.min_system_successes, self.breaker.open_s * 1000,
                           self.breaker.trips_to_disconnect, self.cooldown_s * 1000]
            if reservation.campaign is not None and reservation.campaign_day is not None:
                cancel_keys.append(group_keys.campaign(reservation.campaign))
                cancel_args.append(reservation.campaign_day)
            reply = self._scripts.cancel(keys=cancel_keys, args=cancel_args)
        except redis_conn.FAILURES as exc:
            log.warning("warmup guard: cancel of %s not recorded (slot stays used): %s", reservation.token, exc)
            return CancelOutcome(failure, settled=False, freed=False, failures_in_window=0, tripped=False,
                                 disconnected=False, applied=False)
        settled, freed, in_window, tripped, disconnected, _now = (int(v) for v in reply)
        return CancelOutcome(failure, bool(settled), bool(freed), in_window, bool(tripped), bool(disconnected))

    @staticmethod
    def _now_arg(now: float | None) -> str | int:
        return "" if now is None else int(now * 1000)

    @staticmethod
    def _reason(failure: FailureClass | None) -> str:
        if failure is FailureClass.ACCOUNT_QUOTA:
            return "provider's daily sending quota reached"
        if failure is FailureClass.RATE_LIMITED:
            return "rate limited by the provider"
        if failure is FailureClass.ACCOUNT_AUTH:
            return "disconnected: authentication failed"
        return ""


def _optional(value: int | None) -> str | int:
    return "" if value is None else value
