"""Mailbox records in Redis: add, schedule refresh, pause/resume, health records, status and log import.

None of this is on the send hot path (that is `warmup.guard`); plain commands and transactions suffice.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import secrets
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import redis

from sendhost.embedded import LOST_KEY
from sendhost.model import JITTER_S, MIN_GAP_S, Mailbox
from warmup import keys
from warmup.days import counts_on, format_duration, local_day, midnight_ms, parse_member, schedule_rows
from warmup.errors import UnknownMailbox, WarmupConfigError
from warmup.health import RateGate, format_rate, verdict
from warmup.schedule import DayCap, Ramp, cap_on, plan
from warmup.scripts import GuardScripts

log = logging.getLogger("sendhost.warmup")

EMAIL_RE = re.compile(r"^[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]+@[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
                      r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)+$")
CONFIG_FIELDS = ("address", "group", "domain", "timezone", "start", "min_gap_ms", "jitter_lo_ms", "jitter_hi_ms",
                 "week_one_cap", "step", "step_days", "ceiling")


@dataclass(frozen=True)
class MailboxConfig:
    """A mailbox under warm-up as stored in Redis: the serialisation of a `sendhost.model.Mailbox` with its ramp
    (built by `of`), read back by `from_fields`."""

    address: str
    group: str
    domain: str
    timezone: str
    start: date
    min_gap_ms: int
    jitter_ms: tuple[int, int]
    ramp: Ramp

    @classmethod
    def of(cls, mailbox: Mailbox, ramp: Ramp) -> MailboxConfig:
        """How warm-up stores a mailbox (the model's record) with its ramp: in milliseconds, every value checked
        (WarmupConfigError naming the mailbox and the value)."""
        address = validate_address(mailbox.address)
        low, high = mailbox.jitter_s
        if mailbox.min_gap_s < 0 or not 0 <= low <= high:
            raise WarmupConfigError(f"gap {mailbox.min_gap_s}s / jitter {mailbox.jitter_s} for {address}: need "
                                    f"gap >= 0 and 0 <= low <= high, e.g. min_gap_s={MIN_GAP_S:g}, "
                                    f"jitter_s=({JITTER_S[0]:g}, {JITTER_S[1]:g})")
        gap_s, ramp = _within_provider_limits(mailbox, ramp)
        return cls(address=address, group=validate_group(mailbox.group), domain=mailbox.domain.lower(),
                   timezone=validate_timezone(mailbox.timezone), start=mailbox.start,
                   min_gap_ms=int(gap_s * 1000), jitter_ms=(int(low * 1000), int(high * 1000)), ramp=ramp)

    def to_fields(self) -> dict[str, str | int]:
        return {
            "address": self.address, "group": self.group, "domain": self.domain, "timezone": self.timezone,
            "start": self.start.isoformat(), "min_gap_ms": self.min_gap_ms, "jitter_lo_ms": self.jitter_ms[0],
            "jitter_hi_ms": self.jitter_ms[1], "week_one_cap": self.ramp.week_one_cap, "step": self.ramp.step,
            "step_days": self.ramp.step_days, "ceiling": self.ramp.ceiling,
        }

    @classmethod
    def from_fields(cls, fields: Mapping[str, str]) -> MailboxConfig:
        return cls(
            address=fields["address"], group=fields["group"], domain=fields["domain"], timezone=fields["timezone"],
            start=date.fromisoformat(fields["start"]), min_gap_ms=int(fields["min_gap_ms"]),
            jitter_ms=(int(fields["jitter_lo_ms"]), int(fields["jitter_hi_ms"])),
            ramp=Ramp(int(fields["week_one_cap"]), int(fields["step"]), int(fields["step_days"]),
                      int(fields["ceiling"])),
        )


@dataclass(frozen=True)
class MailboxStatus:
    """What `sendhost warmup status` shows for one mailbox."""

    address: str
    group: str
    day: date
    day_number: int
    cap: int
    sent: int  # sends confirmed today (or shown by an imported send log)
    state: str  # ready | cooldown | daily-limit | paused | not-started
    reason: str | None
    next_eligible: datetime | None  # None: paused until resumed
    breaker: str  # closed | open | disconnected
    failures_in_window: int
    trips_today: int
    reserved: int = 0  # reservations counted against today's cap: the sent ones and those still in flight


@dataclass(frozen=True)
class CapChange:
    """A day whose cap a recorded spam rate changed, for one mailbox: the first such day from today on."""

    address: str
    day: date
    before: int
    after: int
    state: str  # the day's state after the change: held, stepped-back, ...


@dataclass(frozen=True)
class SpamRecord:
    """The outcome of recording a day's spam rate: the verdict, which mailboxes it paused, whose caps it moved."""

    scope: str
    day: date
    rate: float
    verdict: RateGate
    paused: tuple[str, ...]
    cap_changes: tuple[CapChange, ...] = ()
    mailboxes: tuple[str, ...] = ()  # every mailbox the rate applies to

# How far ahead a recorded rate's effect on caps is looked for.
CAP_CHANGE_HORIZON_DAYS = 14


def validate_address(address: str) -> str:
    """The address lower-cased, or WarmupConfigError naming it."""
    if not EMAIL_RE.match(address or ""):
        raise WarmupConfigError(f"mailbox {address!r} is not an email address like alice@example.com")
    return address.lower()


def validate_group(group: str) -> str:
    if not keys.GROUP_RE.match(group):
        raise WarmupConfigError(f"group {group!r} must be 1-64 letters, digits, '.', '_' or '-'")
    return group


def validate_timezone(timezone: str) -> str:
    try:
        ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError):
        raise WarmupConfigError(f"timezone {timezone!r} is not an IANA time zone like Europe/Berlin") from None
    return timezone


def _text(value: object) -> str | None:
    """Replies are str (the client decodes); this narrows redis-py's `bytes | str` typing."""
    return None if value is None else str(value)


def _count_on(fields: Mapping[str, str], day: str) -> int:
    """Reservations counted on `day` (the state hash keeps the current and the previous day)."""
    if fields.get("day") == day:
        return int(fields.get("day_count", 0))
    if fields.get("prev_day") == day:
        return int(fields.get("prev_count", 0))
    return 0


class Mailboxes:
    """The mailbox records; `now_ms` is Redis TIME unless a caller passes `now`."""

    def __init__(self, client: redis.Redis, scripts: GuardScripts,
                 new_seed: Callable[[], str] = lambda: secrets.token_hex(8)) -> None:
        self._client = client
        self._scripts = scripts
        self._new_seed = new_seed
        self._groups: dict[str, str] = {}

    def now_ms(self, now: float | None) -> int:
        if now is not None:
            return int(now * 1000)
        seconds, micros = self._client.time()
        return int(seconds) * 1000 + int(micros) // 1000

    def group_of(self, address: str) -> str:
        """The mailbox's group (cached: a mailbox never changes group); WarmupConfigError if unknown."""
        group = self._groups.get(address)
        if group is None:
            group = _text(self._client.hget(keys.REGISTRY, address))
            if group is None:
                raise UnknownMailbox(address, "add it with `sendhost warmup add` or list it under sendhost_mailboxes "
                                     "in the inventory")
            self._groups[address] = group
        return group

    def keys_of(self, address: str) -> keys.MailboxKeys:
        return keys.GroupKeys(self.group_of(address)).mailbox(address)

    def exists(self, address: str) -> bool:
        return bool(self._client.hexists(keys.REGISTRY, address))

    def lost_note(self) -> str | None:
        """The embedded server's note that it came back without its earlier data, if it did."""
        return _text(self._client.get(LOST_KEY))

    def addresses(self) -> list[str]:
        return sorted(str(a) for a in self._client.hkeys(keys.REGISTRY))

    def config(self, address: str) -> MailboxConfig:
        fields = self._client.hgetall(self.keys_of(address).state)
        return MailboxConfig.from_fields({str(k): str(v) for k, v in fields.items()})

    def add(self, config: MailboxConfig, now_ms: int, *, force: bool = False, paused: str | None = None) -> bool:
        """Create the mailbox, or update its settings keeping its counters; True when it was new. With `paused`
        (a reason) it is paused in the same write, before the registry makes it visible to `pick`.

        Moving the start date earlier so that today leaves week one needs `force`: a mailbox that has not sent
        for a week must not jump to a ramped cap on the day someone edits a date. Every move is recorded."""
        existing = self._client.hget(keys.REGISTRY, config.address)
        if existing is not None and existing != config.group:
            raise WarmupConfigError(f"mailbox {config.address} is already in group {existing!r}; keep the group "
                                    "(its counters live there)")
        state_key = keys.GroupKeys(config.group).mailbox(config.address).state
        fields: dict[Any, Any] = dict(config.to_fields())
        old_start = _text(self._client.hget(state_key, "start")) if existing is not None else None
        if old_start is not None and config.start < date.fromisoformat(old_start):
            fields["start_moved"] = self._check_start_move(config, date.fromisoformat(old_start), now_ms, force)
        seed = _text(self._client.hget(state_key, "jitter_seed")) if existing is not None else None
        fields["jitter_seed"] = seed or self._new_seed()
        # What reserve.lua needs on every call, in one field (one HMGET slot instead of five).
        fields["guard"] = (f"{config.min_gap_ms}|{config.jitter_ms[0]}|{config.jitter_ms[1]}|"
                           f"{fields['jitter_seed']}|{config.address}")
        if paused is not None:
            fields.update(paused="1", pause_reason=paused)
        self._client.hset(state_key, mapping=fields)
        # HSETNX: a mailbox's group is set once (a sender's ACL user may add a mailbox, never move one).
        if not self._client.hsetnx(keys.REGISTRY, config.address, config.group):
            registered = _text(self._client.hget(keys.REGISTRY, config.address))
            if registered != config.group:
                raise WarmupConfigError(f"mailbox {config.address} was just added to group {registered!r} by "
                                        "another process; keep that group (its counters live there)")
        self._groups[config.address] = config.group
        self.refresh_schedule(config.address, now_ms)
        return existing is None

    @staticmethod
    def _check_start_move(config: MailboxConfig, old_start: date, now_ms: int, force: bool) -> str:
        """Refuse (without `force`) a start moved earlier that lifts today out of week one; the record of it."""
        today = local_day(now_ms, config.timezone)
        before = cap_on(old_start, today, config.ramp)
        after = cap_on(config.start, today, config.ramp)
        lifted = before.day_number <= 7 and after.day_number > 7
        if lifted and not force:
            raise WarmupConfigError(
                f"moving the start of {config.address} from {old_start} to {config.start} would lift it out of "
                f"week one today (day {before.day_number} -> day {after.day_number}, cap {before.cap} -> "
                f"{after.cap}); pass --force if it really has been sending since {config.start}")
        stamp = datetime.fromtimestamp(now_ms / 1000, ZoneInfo("UTC")).isoformat(timespec="seconds")
        record = f"{old_start} -> {config.start} at {stamp}{' (forced out of week one)' if lifted else ''}"
        log.info("warm-up start of %s moved %s", config.address, record)
        return record

    def history(self, config: MailboxConfig) -> dict[date, float]:
        """Spam rates that apply to the mailbox: the worse of its domain's and its own, per day."""
        merged: dict[date, float] = {}
        for source in (keys.domain_health(config.domain), self.keys_of(config.address).health):
            for raw_day, rate in self._client.hgetall(source).items():
                day = date.fromisoformat(str(raw_day))
                merged[day] = max(float(rate), merged.get(day, 0.0))
        return merged

    def plan(self, address: str, days: int) -> list[DayCap]:
        config = self.config(address)
        return plan(config.start, date.fromordinal(config.start.toordinal() + days - 1), config.ramp,
                    self.history(config))

    def refresh_schedule(self, address: str, now_ms: int) -> None:
        """Rewrite the mailbox's schedule rows from its start, ramp and health history."""
        config = self.config(address)
        halved = _text(self._client.hget(self.keys_of(address).state, "rested")) == "1"
        rows = schedule_rows(config.start, local_day(now_ms, config.timezone), config.timezone, config.ramp,
                             self.history(config), halved=halved)
        schedule_key = self.keys_of(address).schedule
        with self._client.pipeline(transaction=True) as pipe:
            pipe.delete(schedule_key)
            pipe.zadd(schedule_key, dict(rows))
            pipe.hdel(self.keys_of(address).state, "today")  # reserve.lua's cached row of today
            pipe.execute()

    def pause(self, address: str, reason: str) -> None:
        state = self.keys_of(address).state
        self._client.hset(state, mapping={"paused": "1", "pause_reason": reason})
        if reason.startswith("placement:"):  # a placement rest's pause: not lifted yet
            self._client.hdel(state, "rest_lifted")

    def resume(self, address: str, now_ms: int | None = None) -> None:
        """Clear a pause, a disconnect, a hold, the breaker and a placement rest: a person has looked at it."""
        mailbox = self.keys_of(address)
        rested, reason = (_text(v) for v in self._client.hmget(mailbox.state, ["rested", "pause_reason"]))
        rested_too = rested == "1"
        # A placement rest lifted by a person: marked, so its record in the ledger is closed, not restored
        fields: dict[Any, Any] = {"paused": "0", "trips": "0"}
        if rested_too or (reason or "").startswith("placement:"):
            fields["rest_lifted"] = "1"
        with self._client.pipeline(transaction=True) as pipe:
            pipe.hset(mailbox.state, mapping=fields)
            pipe.hdel(mailbox.state, "pause_reason", "hold_until_ms", "hold_status", "hold_reason",
                      "breaker_open_until_ms", "rested", "rest_reason")
            pipe.delete(mailbox.failures)
            pipe.execute()
        if rested_too and now_ms is not None:
            self.refresh_schedule(address, now_ms)  # its whole ramp back

    def rest(self, address: str, reason: str, now_ms: int) -> None:
        """Halve the mailbox's ramp (placement tests), until `lift_rest` or `resume`."""
        state = self.keys_of(address).state
        self._client.hset(state, mapping={"rested": "1", "rest_reason": reason})
        self._client.hdel(state, "rest_lifted")
        self.refresh_schedule(address, now_ms)

    def lift_rest(self, address: str, now_ms: int) -> None:
        self._client.hdel(self.keys_of(address).state, "rested", "rest_reason")
        self.refresh_schedule(address, now_ms)

    def rest_lifted(self, address: str) -> bool:
        """Did `resume` lift a placement rest (or pause) since the last one?"""
        return _text(self._client.hget(self.keys_of(address).state, "rest_lifted")) == "1"

    def rest_reason(self, address: str) -> str | None:
        """Why the mailbox's ramp is halved, or None when it is not."""
        fields = self._client.hmget(self.keys_of(address).state, ["rested", "rest_reason"])
        return (_text(fields[1]) or "rested") if _text(fields[0]) == "1" else None

    def record_spam_rate(self, rate: float, day: date, now_ms: int, *, domain: str | None = None,
                         mailbox: str | None = None) -> SpamRecord:
        """Store a day's spam rate for a domain or one mailbox, re-plan the mailboxes it covers, apply the gate."""
        if (domain is None) == (mailbox is None):
            raise WarmupConfigError("record a spam rate for exactly one of a domain or a mailbox")
        if mailbox is not None:
            targets = [mailbox]
            health_key, scope = self.keys_of(mailbox).health, mailbox
        else:
            assert domain is not None
            configs = {a: self.config(a) for a in self.addresses()}
            targets = [a for a, c in configs.items() if c.domain == domain]
            if not targets:
                known = ", ".join(sorted({c.domain for c in configs.values()})) or "none"
                raise WarmupConfigError(f"no mailbox under warm-up sends for domain {domain} (domains with "
                                        f"mailboxes: {known}); check --domain, or add the mailboxes first")
            health_key, scope = keys.domain_health(domain), domain
        before = {address: self._caps_ahead(address, now_ms) for address in targets}
        self._client.hset(health_key, day.isoformat(), repr(rate))
        outcome = verdict(rate)
        paused: list[str] = []
        changes: list[CapChange] = []
        for address in targets:
            self.refresh_schedule(address, now_ms)
            after = self._caps_ahead(address, now_ms)
            moved = [(old, new) for old, new in zip(before[address], after, strict=True) if old.cap != new.cap]
            if moved:
                old, new = moved[0]
                changes.append(CapChange(address, new.day, old.cap, new.cap, new.state))
            if outcome == "pause":
                self.pause(address, f"spam rate {format_rate(rate)} on {day} for {scope} is at or above 0.3%")
                paused.append(address)
        return SpamRecord(scope, day, rate, outcome, tuple(paused), tuple(changes), tuple(targets))

    def _caps_ahead(self, address: str, now_ms: int) -> list[DayCap]:
        """The mailbox's caps from today for CAP_CHANGE_HORIZON_DAYS days (before its start: not-started days)."""
        config = self.config(address)
        today = local_day(now_ms, config.timezone)
        history = self.history(config)
        return [cap_on(config.start, today + timedelta(days=n), config.ramp, history)
                for n in range(CAP_CHANGE_HORIZON_DAYS)]

    def status(self, address: str, now_ms: int, breaker_window_ms: int) -> MailboxStatus:
        """The mailbox as the guard sees it at `now_ms`. Reads only: a status never writes state."""
        mailbox = self.keys_of(address)
        with self._client.pipeline(transaction=False) as pipe:
            pipe.hgetall(mailbox.state)
            pipe.zrevrangebyscore(mailbox.schedule, now_ms, "-inf", start=0, num=1)
            pipe.zcount(mailbox.failures, now_ms - breaker_window_ms, "+inf")
            fields, current, failures = pipe.execute()
        if current and parse_member(current[0])[1] > now_ms:
            today, next_day_ms = parse_member(current[0])
        else:  # past the written schedule, or before the first day: computed here, not written back
            today, next_day_ms = self._day_at(MailboxConfig.from_fields(fields), now_ms)
        reserved = _count_on(fields, today.day.isoformat())
        sent = int(fields.get("confirmed_count", 0)) if fields.get("confirmed_day") == today.day.isoformat() else 0
        trips = int(fields.get("trips", 0)) if fields.get("trip_day") == today.day.isoformat() else 0
        state, reason, eligible_ms = self._availability(fields, today, reserved, next_day_ms, now_ms)
        breaker_until = int(fields.get("breaker_open_until_ms", 0))
        if fields.get("paused") == "1" and "breaker" in fields.get("pause_reason", ""):
            breaker = "disconnected"
        else:
            breaker = "open" if breaker_until > now_ms else "closed"
        tz = ZoneInfo(fields["timezone"])
        return MailboxStatus(
            address=address, group=fields["group"], day=today.day, day_number=today.day_number, cap=today.cap,
            sent=sent, state=state, reason=reason,
            next_eligible=None if eligible_ms is None else datetime.fromtimestamp(eligible_ms / 1000, tz),
            breaker=breaker, failures_in_window=int(failures), trips_today=trips, reserved=reserved,
        )

    def _day_at(self, config: MailboxConfig, now_ms: int) -> tuple[DayCap, int]:
        """The mailbox's day at `now_ms` and the instant it ends; before the first day, a not-started day
        that ends when the first day begins."""
        today = local_day(now_ms, config.timezone)
        if today < config.start:
            return DayCap(today, 0, 0, "not-started"), midnight_ms(config.start, config.timezone)
        day = cap_on(config.start, today, config.ramp, self.history(config))
        return day, midnight_ms(today + timedelta(days=1), config.timezone)

    @staticmethod
    def _availability(fields: Mapping[str, str], today: DayCap, reserved: int, next_day_ms: int,
                      now_ms: int) -> tuple[str, str | None, int | None]:
        """Mirror of reserve.lua's checks, in the same order, for display."""
        if today.state == "not-started":
            return "not-started", f"first sending day is {fields['start']}", next_day_ms
        if fields.get("paused") == "1":
            return "paused", fields.get("pause_reason"), None
        hold_until = int(fields.get("hold_until_ms", 0))
        if hold_until > now_ms:
            state = "daily-limit" if fields.get("hold_status") == "skipped-daily-limit" else "cooldown"
            return state, fields.get("hold_reason"), hold_until
        breaker_until = int(fields.get("breaker_open_until_ms", 0))
        if breaker_until > now_ms:
            return "cooldown", "circuit breaker open", breaker_until
        if reserved >= today.cap:
            return "daily-limit", f"reserved {reserved} of {today.cap} today", next_day_ms
        last = int(fields.get("last_send_ms", -1))
        gap = int(fields["min_gap_ms"])
        stored = fields.get("next_send_ms")  # drawn by reserve.lua at the last send
        eligible = max(last + gap, int(stored)) if stored else last + gap + int(fields["jitter_lo_ms"])
        if last >= 0 and now_ms < eligible:
            left = format_duration(eligible - now_ms)
            return "cooldown", f"needs {format_duration(eligible - last)} between sends; {left} left", eligible
        return "ready", None, now_ms

    def import_sends(self, sends: Iterable[tuple[str, datetime]], now_ms: int) -> dict[str, tuple[int, int]]:
        """Raise each mailbox's day counter and last send to what its send log shows; {address: (count, last)}."""
        per_mailbox: dict[str, list[datetime]] = {}
        for address, sent_at in sends:
            per_mailbox.setdefault(validate_address(address), []).append(sent_at)
        configs = {address: self.config(address) for address in per_mailbox}  # unknown -> error, nothing written
        restored: dict[str, tuple[int, int]] = {}
        for address, times in per_mailbox.items():
            config = configs[address]
            today = local_day(now_ms, config.timezone)
            today_count = sum(1 for t in times if counts_on(t, today, config.timezone, now_ms))
            last_ms = max((int(t.timestamp() * 1000) for t in times if t.timestamp() * 1000 <= now_ms), default=-1)
            mailbox = self.keys_of(address)
            count, last = self._scripts.restore(keys=[mailbox.state],
                                                args=[today.isoformat(), today_count, last_ms])
            restored[address] = (int(count), int(last))
        return restored


def _within_provider_limits(mailbox: Mailbox, ramp: Ramp) -> tuple[float, Ramp]:
    """The gap and ramp the guard holds: the mailbox's own, bounded by its provider's documented sending limits
    (`smtp.daily_limit`, `smtp.min_gap_s`): a ramp never climbs past what the provider lets the account send."""
    smtp = mailbox.smtp
    if smtp is None:
        return mailbox.min_gap_s, ramp
    gap_s = max(mailbox.min_gap_s, smtp.min_gap_s)
    if smtp.daily_limit is not None and ramp.ceiling > smtp.daily_limit:
        ramp = dataclasses.replace(ramp, ceiling=smtp.daily_limit,
                                   week_one_cap=min(ramp.week_one_cap, smtp.daily_limit))
    return gap_s, ramp
