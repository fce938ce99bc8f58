"""A campaign's forecast: the agent's own send path run ahead on a simulated clock, over a copy of the ledger and the
guard as they are now (simulation.forecast.snapshot), with a provider that accepts every message and sends nothing
(simulation.forecast.dry_run). So the forecast's rules are the agent's, not a second model of them: the claim's
(step order, pins, campaign state, suppression, the sending window), the guard's (ramps, caps, gaps, pace, campaign
caps) and the sequence's (a follow-up due its delay after the previous step was sent, from the same mailbox).

One agent per mailbox group of the inventory sends every campaign's rows of its group (they compete for the same
mailboxes, as they do), one row after another as the agent's worker loop does; a group whose mailboxes the guard
all refused waits for what the guard asked, as the simulation's workers do. With a reply rate R, each message sent
is answered by a deterministic R of its recipients (by row), which ends their sequence as a reply does.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import math
import random
import tempfile
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import redis

from sender.assembly import build_sender
from sender.campaigns.window import zone
from sender.ledger import connection as db
from sender.ledger import window_intervals
from sender.ledger.campaigns import Campaigns
from sender.ledger.events import Event, Feedback
from sender.ledger.store import Ledger
from sender.sending.agent import Agent
from sender.sending.report import Report, ReportKind
from sender.settings import AgentSettings
from sendhost.model import Mailbox
from simulation.clock import SimClock
from simulation.forecast.days import Forecast, ForecastDay
from simulation.forecast.dry_run import DryRunTokens, open_dry_run
from simulation.forecast.held import Watch
from simulation.forecast.snapshot import copy_guard, copy_ledger
from simulation.mail import UNSUBSCRIBE_BASE_URL, InlineExecutor, embedded_ledger
from simulation.sandbox import embedded_redis
from warmup import CampaignSlot, Decision, Guard

DAY_S = 86_400.0
WORKER = "forecast:0"
ROWS_PER_PASS = 500  # rows one look takes through the send path at one instant; the rest at the next look
MIN_STEP_S = 1.0  # a look never follows the last at the same instant
# Rows due that no look can claim (pinned to a mailbox outside the inventory, or waiting for their window): looked
# at again after this long, not every second.
STUCK_STEP_S = 300.0
SEED = 1  # the forecast's own draws (the pool's budgets, new mailboxes' jitter): the same forecast every time


@dataclass(frozen=True)
class Sources:
    """Where a forecast reads the state it starts from: the ledger, and the guard's Redis (None: unread, `why`)."""

    ledger_url: str
    guard: redis.Redis | None
    why_unread: str | None = None


class _Asked:
    """The guard's pick, remembering what the last reservation asked and what it answered."""

    def __init__(self, guard: Guard) -> None:
        self.guard = guard
        self.addresses: tuple[str, ...] = ()
        self.decision: Decision | None = None
        self.slots: dict[str, CampaignSlot] = {}  # campaign -> the slot its last reservation asked for

    def __call__(self, addresses: Sequence[str], /, *, campaign: CampaignSlot | None = None,
                 window_left_s: float | None = None) -> Decision:
        self.addresses = tuple(a.lower() for a in addresses)
        if campaign is not None:
            self.slots[campaign.name] = campaign
        self.decision = self.guard.pick(addresses, campaign=campaign, window_left_s=window_left_s)
        return self.decision


@dataclass
class _Group:
    """One mailbox group's agent, and when it looks at the ledger next."""

    name: str
    agent: Agent
    mailboxes: frozenset[str]
    wake_s: float


def forecast(campaign: str, sources: Sources, mailboxes: Sequence[Mailbox], *, now_s: float, days: int,
             reply_rate: float = 0.0) -> Forecast:
    """`campaign`'s next `days` days from `now_s`, sent by the inventory's `mailboxes` (those with smtp settings)."""
    return forecast_all([campaign], sources, mailboxes, now_s=now_s, days=days, reply_rate=reply_rate)[campaign]


def forecast_all(campaigns: Sequence[str], sources: Sources, mailboxes: Sequence[Mailbox], *, now_s: float,
                 days: int, reply_rate: float = 0.0) -> dict[str, Forecast]:
    """The forecast of each of `campaigns` (each a campaign with a file), from one run of the send path."""
    start = datetime.fromtimestamp(now_s, UTC)
    found: dict[str, Forecast] = {}
    with _scratch() as (scratch_redis, scratch_url), _quiet("ippool"):
        copied = copy_ledger(sources.ledger_url, scratch_url, start)
        if sources.guard is not None:
            copied["guard keys"] = copy_guard(sources.guard, scratch_redis)
        clock = SimClock(now_s)
        with contextlib.closing(Ledger(db.connect(scratch_url), scratch_url, clock=clock)) as ledger:
            run = _Run(ledger, clock, scratch_redis, mailboxes, campaigns, reply_rate)
            run.until(now_s + days * DAY_S)
            for watch in run.watches.values():
                first_day = watch.day(now_s)
                shown = [date.fromordinal(first_day.toordinal() + n) for n in range(days)]
                sent = _sent_by_day(ledger, watch.campaign, start, watch.tz)
                limits = watch.limits(shown)
                steps_left = _steps_left(ledger, watch.campaign)
                last_day = max(sent, default=None) if steps_left == 0 else None
                found[watch.campaign] = Forecast(
                    watch.campaign, watch.tz.key, start, reply_rate,
                    tuple(ForecastDay(day, *sent.get(day, (0, 0, {})), *limits[day]) for day in shown),
                    last_day, steps_left, sources.why_unread, copied)
    return found


@contextlib.contextmanager
def _quiet(logger: str) -> Iterator[None]:
    """`logger` says only its errors for the block: the forecast's pool has no slots, every lease of it falls back
    to the host's address by design, and its periodic word on that is not the user's concern."""
    log = logging.getLogger(logger)
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        log.setLevel(level)


@contextlib.contextmanager
def _scratch() -> Iterator[tuple[redis.Redis, str]]:
    """A private Redis and a private, migrated PostgreSQL, removed at the end."""
    with tempfile.TemporaryDirectory(prefix="sendhost-forecast-") as tmp:
        state_dir = Path(tmp)
        with embedded_redis(state_dir) as client, embedded_ledger(state_dir) as url:
            yield client, url


class _Run:
    """The looks of every group's agent on the simulated clock, each campaign's days watched."""

    def __init__(self, ledger: Ledger, clock: SimClock, client: redis.Redis, mailboxes: Sequence[Mailbox],
                 campaigns: Sequence[str], reply_rate: float) -> None:
        self.ledger = ledger
        self.clock = clock
        self.reply_rate = reply_rate
        seeds = random.Random(SEED)
        machinery = build_sender(client, clock=clock, rng=random.Random(SEED),
                                 new_seed=lambda: f"{seeds.getrandbits(64):016x}")
        self.asked = _Asked(machinery.guard)
        self.feedback = Feedback(ledger)
        key = ledger.unsubscribe_key()
        senders = {m.address.lower(): m for m in mailboxes if m.smtp is not None}
        self.groups: list[_Group] = []
        for group in sorted({m.group for m in senders.values()}):
            of_group = tuple(m for m in senders.values() if m.group == group)
            settings = AgentSettings(host="forecast", primary_ip=None, mailboxes=of_group,
                                     unsubscribe_base_url=UNSUBSCRIBE_BASE_URL)
            agent = machinery.agent(settings, unsubscribe_key=key, side_tasks=InlineExecutor(), pick=self.asked,
                                    tokens=DryRunTokens(), opener=open_dry_run)
            agent.prepare(ledger)
            self.groups.append(_Group(group, agent, frozenset(m.address.lower() for m in of_group), clock()))
        self._windows_known_s = clock()  # when the sending windows' intervals are next extended
        self.watches: dict[str, Watch] = {}
        specs = Campaigns(ledger)
        for name in campaigns:
            spec = specs.spec(name)
            campaign_group = spec.group if spec is not None else None
            members = next((g.mailboxes for g in self.groups if g.name == campaign_group), frozenset())
            tz = zone(spec.pacing.timezone if spec else "UTC", "UTC")
            self.watches[name] = Watch(name, campaign_group, tz, ledger, machinery.guard, members, senders,
                                       self.asked.slots.get)

    def until(self, end_s: float) -> None:
        while self.groups:
            group = min(self.groups, key=lambda g: g.wake_s)
            if group.wake_s >= end_s or math.isinf(group.wake_s):
                break
            for watch in self.watches.values():  # whole days with no look: nothing came due in them
                watch.skipped(watch.day(self.clock()), watch.day(group.wake_s))
            self.clock.advance_to(group.wake_s)
            if self.clock() >= self._windows_known_s:
                self._windows_ahead()
            group.wake_s = self._look(group)
        for watch in self.watches.values():
            watch.finish(self.clock(), end_s)

    def _windows_ahead(self) -> None:
        """The agent's sweep cycle's share a forecast needs, once a simulated day as the simulation does it: the
        sending windows' intervals the claim reads, extended ahead (sender.ledger.window_intervals)."""
        window_intervals.extend(self.ledger)
        self._windows_known_s = self.clock() + DAY_S

    def _look(self, group: _Group) -> float:
        """One look of `group`'s agent: rows through the send path until none is due or the group is held; when
        to look again."""
        now = self.clock()
        watches = [watch for watch in self.watches.values() if watch.group == group.name]
        for watch in watches:
            watch.look_starts(now)
        sends: Counter[str] = Counter()
        refused: Decision | None = None
        wake: float | None = None
        for _row in range(ROWS_PER_PASS):
            self.asked.decision = None
            report = group.agent.send_one(self.ledger, WORKER)
            if report is None:
                break
            if report.kind is ReportKind.SENT:
                self._sent(report, sends)
                continue
            decision = self.asked.decision
            if report.kind is ReportKind.BLOCKED and decision is not None and not decision.reserved \
                    and set(self.asked.addresses) >= group.mailboxes:
                # every mailbox of the group refused: the group waits what the guard asked
                refused = decision
                until = report.until.timestamp() if report.until is not None else now + STUCK_STEP_S
                wake = max(until, now + MIN_STEP_S)
                break
        else:
            wake = now  # more rows than one look takes: the next look at once
        for watch in watches:
            watch.look_ended(now, sends[watch.campaign], refused, self.asked.addresses)
        if wake is not None:
            return wake
        due = self.ledger.next_due_s([group.name])
        if due is None:
            return math.inf
        return now + (STUCK_STEP_S if due <= 0 and not sends else max(due, MIN_STEP_S))

    def _sent(self, report: Report, sends: Counter[str]) -> None:
        found = self.ledger.fetch_one("forecast_row_campaign", {"id": report.row}, "forecast row")
        watch = self.watches.get(str(found[0])) if found and found[0] else None
        if watch is not None:
            watch.sent(self.clock())
            sends[watch.campaign] += 1
        if self.reply_rate > 0 and _answers(report.row, self.reply_rate):
            self.feedback.apply(report.row, Event.REPLIED, source="forecast", ref="forecast",
                                at=datetime.fromtimestamp(self.clock(), UTC), detail="a reply the forecast assumed")


def _answers(row: int, rate: float) -> bool:
    """Whether the forecast assumes row `row`'s recipient answers: a fixed draw per row, under `rate`."""
    draw = int.from_bytes(hashlib.sha256(f"forecast-reply:{row}".encode()).digest()[:8], "big") / 2**64
    return draw < rate


def _sent_by_day(ledger: Ledger, campaign: str, start: datetime,
                 tz: ZoneInfo) -> dict[date, tuple[int, int, dict[str, int]]]:
    """The campaign's sends from `start` on, per local day: (first steps, follow-ups, per mailbox)."""
    rows = ledger.fetch_all("forecast_sent", {"name": campaign, "since": start}, "forecast sends")
    firsts: Counter[date] = Counter()
    follow_ups: Counter[date] = Counter()
    by_mailbox: dict[date, Counter[str]] = {}
    for step, mailbox, accepted_at in rows:
        day = accepted_at.astimezone(tz).date()
        (firsts if step == 1 else follow_ups)[day] += 1
        by_mailbox.setdefault(day, Counter())[mailbox] += 1
    return {day: (firsts[day], follow_ups[day], dict(by_mailbox[day])) for day in by_mailbox}


def _steps_left(ledger: Ledger, campaign: str) -> int:
    row = ledger.fetch_one("forecast_steps_left", {"name": campaign}, "forecast steps left")
    return int(row[0]) if row else 0

