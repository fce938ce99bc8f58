"""The simulation's event loop: the campaign's lead imports, sender workers, the recipients' answers, the pool
worker, on-call and the chart sampler, interleaved on one simulated clock in one process, deterministic for a seed.

    result = run_simulation(inventory, SimConfig(days=14, sends_per_day=120, seed=1))

Everything is the real code (the ledger's campaigns and sequence rules, the sender agent's send path, the inbox
reader's parser, ippool's lease engine and rotation, warmup's guard, dns_audit's checks) against an embedded Redis,
an embedded PostgreSQL, an in-process SMTP server on loopback addresses and moto; only time, the leads, the people
behind them and AWS's address reuse (the named EC2 stand-in) are simulated.
"""

from __future__ import annotations

import functools
import heapq
import itertools
import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from datetime import time as day_time

from dns_audit.findings import DomainReport
from sender.assembly import build_sender
from sender.campaigns.spec import CampaignSpec
from sender.ledger import window_intervals
from sender.ledger.campaigns import CampaignStatus
from sender.ledger.events import Feedback
from simulation import events
from simulation.campaign import LeadFeed, SequenceRow, sequence_rows
from simulation.clicks import Click, Clickers, take_click
from simulation.clock import SimClock
from simulation.dns_check import audit_zones
from simulation.ec2_fake import SimulatedEc2
from simulation.fleet import ConnectionMeter, ConnectionUse
from simulation.interventions import RunParts
from simulation.mail import (
    Deliveries,
    Delivery,
    SourceAddress,
    count_deliveries,
    mail_world,
)
from simulation.model import SimConfig, SimInventory, check_inventory
from simulation.moto_world import build_hosts
from simulation.pool_worker import PoolWorker
from simulation.recipients import FeedbackPaths, Reaction, Recipients
from simulation.sandbox import sandbox, session_factory
from simulation.senders import SenderWorker
from warmup.schedule import plan

POOL_NAME = "sendhost-sim"
DAY_S = 86_400.0
# On-call retires one slot by command once, half-way through the second day, so the run shows that path too.
ONCALL_RETIRE_AT_S = 1.5 * DAY_S
# Leads are turned away while the senders are this far behind: an hour's worth of arrivals have a step due and
# unsent (simulation.campaign.LeadFeed). Short, so a follow-up due is not queued behind hours of first steps.
BACKLOG_S = 3600.0
ENDING_EVENTS = ("replied", "bounced", "unsubscribed", "complained")
IMPORT_EVERY_S = 3600.0  # the leads that came in are imported hourly, as a CRM sync would (one add-leads each)

Progress = Callable[[float], None]


@dataclass
class SimResult:
    """A finished run: its settings, the event log, each mailbox's cap per local day, and the DNS audit."""

    config: SimConfig
    inventory: SimInventory
    start: date
    start_s: float
    end_s: float
    log: events.EventLog
    caps: dict[str, dict[str, int]]  # mailbox -> its local day (ISO) -> that day's cap
    audit: list[DomainReport] = field(default_factory=list)
    fallbacks: dict[str, int] = field(default_factory=dict)  # by reason, as the pool counted them
    aws_handed_back: int = 0  # allocations AWS (the stand-in) answered with a recently released address
    aws_fresh: int = 0
    worker_errors: list[str] = field(default_factory=list)  # failures the pool worker's cycles reported
    rotation_outcomes: dict[str, int] = field(default_factory=dict)  # as ippool's Rotator reported them
    redraw_reasons: dict[str, int] = field(default_factory=dict)  # why drawn addresses were refused
    delivered: list[Delivery] = field(default_factory=list)  # what the submission server accepted, in order
    sources: dict[str, SourceAddress] = field(default_factory=dict)  # loopback source -> what it stands for
    deliveries: Deliveries | None = None  # the server's record per mailbox and per source address
    specs: list[CampaignSpec] = field(default_factory=list)  # the campaigns run, one per mailbox group
    campaigns: list[CampaignStatus] = field(default_factory=list)  # `campaign status` of each, at the end
    sequences: list[SequenceRow] = field(default_factory=list)  # every lead's rows as the ledger holds them
    leads_turned_away: int = 0  # leads not imported: the senders were an hour's worth of leads behind
    lead_timezones: dict[str, str] = field(default_factory=dict)  # lead -> its `timezone` column, as imported
    connections: ConnectionUse | None = None  # what the embedded services saw (config.measure_connections)
    reconcile: list[str] = field(default_factory=list)  # `pool reconcile`'s differences at the end (none: agreed)
    eips_at_end: int = 0  # EIPs tagged ours in AWS at the end: in slots or parked
    leads_turned_away_closed: int = 0  # of the leads turned away, those whose sending window was closed then


def start_date(inventory: SimInventory, config: SimConfig) -> date:
    """The first simulated day: the configured one, else the latest mailbox start (every mailbox sends on day 1)."""
    return config.start or max(mailbox.start for mailbox in inventory.mailboxes)


def run_simulation(inventory: SimInventory, config: SimConfig, progress: Progress | None = None) -> SimResult:
    """Run the whole toolkit on simulated time; raise SimulationConfigError for bad input before anything starts."""
    config.check()
    check_inventory(inventory)
    first_day = start_date(inventory, config)
    start_s = datetime.combine(first_day, day_time(0), UTC).timestamp()
    end_s = start_s + config.days * DAY_S
    clock = SimClock(start_s)
    log = events.EventLog()
    seeds = random.Random(config.seed)
    with sandbox(inventory.region) as (client, state_dir):
        sessions = session_factory(inventory.region)
        worlds = build_hosts(sessions(), inventory.region, inventory.hosts)
        # The adapter's client-side pacing and retry backoff wait in simulated time.
        adapter = SimulatedEc2(sessions, inventory.region, seed=seeds.randrange(2**32), clock=clock,
                               sleep=clock.sleep, rng=random.Random(seeds.randrange(2**32)))
        try:
            pool_rng = random.Random(seeds.randrange(2**32))
            mailbox_seeds = random.Random(seeds.randrange(2**32))
            sending = build_sender(client, clock=clock, rng=pool_rng,
                                   new_seed=lambda: f"{mailbox_seeds.getrandbits(64):016x}")
            pool_worker = PoolWorker(sending.pool, adapter, POOL_NAME, worlds, clock, log)
            pool_worker.provision()
            with mail_world(state_dir, inventory, sending) as mail:
                senders = [SenderWorker(f"{world.host.name}/w{index + 1}", world.host.name, mail,
                                        inventory.mailboxes, clock, random.Random(seeds.randrange(2**32)), log,
                                        config.send_seconds)
                           for world in worlds for index in range(config.workers_per_host)]
                feed = LeadFeed.start(mail.ledger, mail.groups, random.Random(seeds.randrange(2**32)),
                                      backlog_limit=max(1, round(config.sends_per_day * BACKLOG_S / DAY_S)),
                                      plan=config.campaign, now=start_s, zones=_zones(inventory))
                recipients = Recipients(random.Random(seeds.randrange(2**32)), config.reactions)
                paths = FeedbackPaths(Feedback(mail.ledger), mail.unsubscribe_key)
                # a generator of its own, not drawn from `seeds`: the run's other draws stay as they were
                clickers = Clickers(random.Random(f"clicks:{config.seed}"), config.reactions)
                meter = ConnectionMeter(client, mail.ledger.url or "") if config.measure_connections else None
                parts = RunParts(mail.ledger, mail.ledger.url or "", client,
                                 tuple(m for agent in mail.agents.values() for m in agent.settings.mailboxes
                                       if agent.settings.host == worlds[0].host.name), clock, feed.specs)
                try:
                    loop = _Loop(config, clock, end_s, senders, pool_worker, log,
                                 random.Random(seeds.randrange(2**32)), progress,
                                 _Campaign(feed, recipients, paths, clickers), meter)
                    for intervention in config.interventions:
                        loop.at(start_s + intervention.at_s, functools.partial(intervention.act, parts))
                    loop.run(start_s)
                    if meter is not None:
                        meter.finish()
                finally:
                    if meter is not None:
                        meter.close()
                delivered = list(mail.recorder.deliveries)
                campaigns = feed.status()
                sequences = sequence_rows(mail.ledger, feed.addresses)
            fallbacks = dict(sending.pool.fallbacks.totals)
            worker_errors = list(pool_worker.errors)
            outcomes, redraws = dict(pool_worker.outcomes), dict(pool_worker.redraw_reasons)
            # `pool reconcile` at the end, reading only: AWS (the EIPs tagged ours) against Redis's slots and
            # parked index. No difference: no EIP leaked, none serving two slots, none parked and forgotten.
            differences = [f"{d.kind} {d.host} {d.subject}: {d.detail}"
                           for d in pool_worker.machinery.reconciler().run()]
            eips_at_end = len(adapter.describe_pool_addresses(POOL_NAME))
        finally:
            adapter.close()
        handed_back, fresh = adapter.handed_back, adapter.fresh
    in_service = tuple(sorted({p.public_ip for p in log.placements} - {r.public_ip for r in log.retirements}))
    audit = audit_zones(config.zone_dir, inventory.domains, in_service) if config.zone_dir else []
    budgets = {(p.host, p.slot, p.generation): p.budget for p in log.placements}
    return SimResult(config, inventory, first_day, start_s, end_s, log, _caps(inventory, first_day, config.days),
                     audit, fallbacks, handed_back, fresh, worker_errors, outcomes, redraws, delivered,
                     dict(mail.sources.sources), count_deliveries(delivered, mail.sources.sources, budgets),
                     sorted(feed.specs.values(), key=lambda spec: spec.name), campaigns, sequences,
                     feed.turned_away, dict(feed.timezone_of), meter.use if meter is not None else None,
                     differences, eips_at_end, feed.turned_away_closed)


def _zones(inventory: SimInventory) -> dict[str, list[str]]:
    """Each mailbox group's mailboxes' time zones, in the inventory's order."""
    zones: dict[str, list[str]] = {}
    for mailbox in inventory.mailboxes:
        zones.setdefault(mailbox.group, []).append(mailbox.timezone)
    return zones


def _caps(inventory: SimInventory, first_day: date, days: int) -> dict[str, dict[str, int]]:
    """Each mailbox's cap on every local day the run touched (warmup's own schedule, no health history)."""
    caps: dict[str, dict[str, int]] = {}
    for mailbox in inventory.mailboxes:
        # Local days run from the day before the first UTC day to the last (time zones either side of UTC).
        until = first_day + timedelta(days=days)
        start = max(mailbox.start, first_day - timedelta(days=1))
        caps[mailbox.address.lower()] = {row.day.isoformat(): row.cap for row in plan(mailbox.start, until)
                                         if row.day >= start}
    return caps


@dataclass(frozen=True)
class _Campaign:
    """The campaign side of the run: leads joining, the people behind them, the ledger's feedback entry points."""

    feed: LeadFeed
    recipients: Recipients
    paths: FeedbackPaths
    clickers: Clickers | None = None


class _Loop:
    """The event queue: (when, order, action). Ties run in the order they were scheduled."""

    def __init__(self, config: SimConfig, clock: SimClock, end_s: float, senders: list[SenderWorker],
                 pool_worker: PoolWorker, log: events.EventLog, rng: random.Random,
                 progress: Progress | None, campaign: _Campaign, meter: ConnectionMeter | None = None) -> None:
        self.config = config
        self.clock = clock
        self.start_s = end_s - config.days * DAY_S
        self.end_s = end_s
        self.senders = senders
        self.pool_worker = pool_worker
        self.log = log
        self.rng = rng
        self.progress = progress
        self.campaign = campaign
        self.meter = meter
        self._queue: list[tuple[float, int, Callable[[], None]]] = []
        self._order = itertools.count()
        # Free senders, the longest free first: each look at the ledger goes to the next in turn, so the sends
        # spread over the workers and hosts as a pool of agents spreads them.
        self._free: deque[int] = deque(range(len(senders)))
        self._look_at: float | None = None  # when the next look is queued
        # Leads arrive as one Poisson process: sends_per_day a day.
        self.lead_rate = config.sends_per_day / DAY_S

    def at(self, when: float, action: Callable[[], None]) -> None:
        heapq.heappush(self._queue, (when, next(self._order), action))

    def run(self, start_s: float) -> None:
        self._next_lead(start_s)
        if self.campaign.feed.addresses:
            self._look(start_s)  # a list was imported at the start: its first steps are due now
        self.at(start_s, self._pool_cycle)
        self.at(start_s + IMPORT_EVERY_S, self._import)
        self.at(start_s, self._sample)
        if self.senders:
            self.at(start_s + DAY_S, self._windows_ahead)
        hosts = self.pool_worker.hosts
        if self.config.days >= 2 and hosts:
            last = hosts[-1]
            self.at(start_s + ONCALL_RETIRE_AT_S, lambda: self._oncall_retire(last.host.name, len(last.slot_ips) - 1))
        while self._queue and self._queue[0][0] < self.end_s:
            when, _order, action = heapq.heappop(self._queue)
            self.clock.advance_to(when)
            action()
        self.clock.advance_to(self.end_s)
        self._record_sample()
        if self.progress:
            self.progress(1.0)

    def _windows_ahead(self) -> None:
        """The agent's sweep cycle's share the run needs: the sending windows' intervals the claim reads, extended
        ahead (sender.ledger.window_intervals; written for two weeks when a campaign is applied), once a day."""
        window_intervals.extend(self.senders[0].mail.ledger)
        self.at(self.clock() + DAY_S, self._windows_ahead)

    def _next_lead(self, after: float) -> None:
        if self.lead_rate > 0:
            self.at(after + self.rng.expovariate(self.lead_rate), self._lead)

    def _lead(self) -> None:
        self.campaign.feed.arrive()
        self._next_lead(self.clock())

    def _import(self) -> None:
        if self.campaign.feed.import_arrived(self.clock()):
            self._look(self.clock())
        self.at(self.clock() + IMPORT_EVERY_S, self._import)

    def _look(self, when: float) -> None:
        """Queue a look at the ledger by a free sender at `when`, unless one is queued no later: the look that
        finds nothing to send queues the next one, at the time it learns."""
        if self._look_at is not None and self._look_at <= when:
            return
        self._look_at = when
        self.at(when, lambda: self._attempt(when))

    def _attempt(self, planned: float) -> None:
        if self._look_at != planned:
            return  # an earlier look took its place
        self._look_at = None
        if not self._free:
            return  # every sender is busy: the first to finish looks again
        index = self._free.popleft()
        sender = self.senders[index]
        leases = sender.mail.sources.leases
        retry_at = sender.attempt()
        if sender.mail.sources.leases != leases:
            # an attempt that leased nothing (the guard refused) left the pool as it was; one that leased changed
            # its own host's
            self.pool_worker.leased(sender.host)
        if sender.in_flight is not None:
            self._sent(sender.in_flight.send, sender.in_flight.delivery)
            self.at(sender.in_flight.done_at, lambda: self._finish(index))
            self._look(self.clock())  # the next row may go at once, from another sender
            return
        self._free.append(index)
        if retry_at is not None:
            self._look(retry_at)

    def _sent(self, send: events.Send, delivery: Delivery) -> None:
        """A message was accepted: its lead's next step comes due, and its recipient may react."""
        self.campaign.feed.sent(delivery.rcpt, send.mailbox, send.count >= send.cap, self.clock())
        reaction = self.campaign.recipients.receive(delivery, self.clock())
        if reaction is not None:
            self.at(reaction.at, lambda: self._react(reaction))
        if self.campaign.clickers is not None:
            for click in self.campaign.clickers.receive(delivery, self.clock()):
                self.at(click.at, functools.partial(self._click, click))

    def _click(self, click: Click) -> None:
        paths = self.campaign.paths
        self.log.clicks.append(take_click(paths.feedback, paths.unsubscribe_key, click, self.clock()))

    def _react(self, reaction: Reaction) -> None:
        taken = self.campaign.paths.take(reaction, self.clock())
        self.log.reactions.append(taken)
        if taken.event in ENDING_EVENTS:
            self.campaign.feed.ended(taken.address)
        elif taken.held_until is not None:
            self.campaign.feed.held(taken.address, date.fromisoformat(taken.held_until))

    def _finish(self, index: int) -> None:
        self.senders[index].finish()
        # First in line, as a real worker loops at once: its send's record claimed the next row ahead (Agent's
        # record-and-claim), which waits `sending` until this worker looks again. At the back of the line, that
        # row sat for hours behind the other workers' looks in a fleet of 12 (the feed then counted its lead as
        # due and unsent, and turned new leads away).
        self._free.appendleft(index)
        self._look(self.clock())

    def _pool_cycle(self) -> None:
        self.pool_worker.cycle()
        self.at(self.clock() + self.config.pool_interval_s, self._pool_cycle)

    def _oncall_retire(self, host: str, slot: int) -> None:
        self.pool_worker.retire(host, slot)

    def _sample(self) -> None:
        self._record_sample()
        if self.progress:
            self.progress((self.clock() - self.start_s) / (self.end_s - self.start_s))
        self.at(self.clock() + self.config.sample_interval_s, self._sample)

    def _record_sample(self) -> None:
        if self.meter is not None:
            self.meter.sample()
        self.log.samples.append(events.Sample(self.clock(), self.pool_worker.leasable(), self.pool_worker.held,
                                              self.pool_worker.parked_count))
