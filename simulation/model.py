"""What a simulation runs on: the hosts, mailboxes and domains of an inventory (the records of `sendhost.model`),
and the run's settings. The package never imports `toolkit`: the CLI hands it the inventory's records.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING

from sendhost.model import Domain, Mailbox, SenderHost
from simulation.errors import SimulationConfigError

if TYPE_CHECKING:
    from simulation.interventions import Intervention

MAX_DAYS = 365
MAX_SENDS_PER_DAY = 100_000


@dataclass(frozen=True)
class SimInventory:
    """Everything the simulation reads from an inventory."""

    hosts: tuple[SenderHost, ...]
    mailboxes: tuple[Mailbox, ...]
    domains: tuple[Domain, ...] = ()
    region: str = "us-east-1"


@dataclass(frozen=True)
class Reactions:
    """How often the recipients react, and how soon. Step k's rates are the k-th of each tuple (the last for any
    later step)."""

    bounce: float = 0.03  # addresses that do not exist: the first message bounces
    reply: tuple[float, ...] = (0.06, 0.05, 0.04)  # a person's reply, per step
    unsubscribe: tuple[float, ...] = (0.01, 0.02, 0.03)  # a click on the one-click link, per step
    away: tuple[float, ...] = (0.04, 0.03, 0.03)  # an out-of-office naming the day its author is back, per step
    stop: tuple[float, ...] = (0.01, 0.01, 0.01)  # a reply asking to be removed ("please remove me"), per step
    away_days: tuple[int, int] = (2, 14)  # how many days after the message the away author is back
    away_after_s: tuple[float, float] = (30.0, 600.0)  # an out-of-office answers within minutes
    bounce_after_s: tuple[float, float] = (60.0, 900.0)  # the recipient's server reports within minutes
    reply_mean_s: float = 8 * 3600.0  # people answer within hours, some after days
    unsubscribe_mean_s: float = 2 * 3600.0
    click: tuple[float, ...] = (0.05, 0.04, 0.02)  # a person clicks a tracked link of the message, per step
    click_mean_s: float = 4 * 3600.0
    scanned: float = 0.1  # recipients whose mail gateway walks every link of every message as it arrives

    def at_step(self, rates: tuple[float, ...], step: int) -> float:
        return rates[min(step, len(rates)) - 1] if rates else 0.0


# The default run's pacing keys: the sending window docs/campaigns.md teaches, read on each lead's own clock (its
# `timezone` column), so no lead is mailed at night and nothing goes at the weekend.
DEMO_PACING = """\
window: {days: [mon, tue, wed, thu, fri], hours: ["09:00-17:00"]}   # on each lead's own clock (its timezone column)
"""


@dataclass(frozen=True)
class GroupPlan:
    """What one mailbox group's campaign adds to the three steps, and who its leads are."""

    group: str
    pacing: str = DEMO_PACING  # the campaign file's pacing keys, as YAML lines (docs/campaigns.md); "": none
    # every lead's `timezone` column; None: the time zones of the group's mailboxes, lead after lead in turn (the
    # leads live where the mailboxes that write to them do)
    lead_timezone: str | None = None
    list_size: int = 0  # leads imported when the campaign starts, as a list uploaded at once


@dataclass(frozen=True)
class CampaignPlan:
    """The campaigns of a run, by mailbox group; a group not named runs the three steps within DEMO_PACING's
    window, its leads coming in as the run goes in the time zones of its mailboxes (the default run)."""

    groups: tuple[GroupPlan, ...] = ()

    def of(self, group: str) -> GroupPlan:
        return next((plan for plan in self.groups if plan.group == group), GroupPlan(group))


DEFAULT_PLAN = CampaignPlan()  # the default run's campaigns


@dataclass(frozen=True)
class SimConfig:
    """Settings of one run. `start` defaults to the latest mailbox start date (so every mailbox sends from day 1)."""

    days: int = 14
    sends_per_day: int = 120
    seed: int = 1
    start: date | None = None
    workers_per_host: int = 2
    pool_interval_s: float = 300.0  # how often the pool worker rotates ready slots and reaps parked EIPs
    sample_interval_s: float = 300.0  # how often the charts' series are sampled
    send_seconds: tuple[float, float] = (2.0, 12.0)  # how long a lease is held for one send
    zone_dir: Path | None = None  # zone files for the DNS audit; None: no audit
    reactions: Reactions = Reactions()  # how the recipients answer (simulation.recipients)
    campaign: CampaignPlan = DEFAULT_PLAN  # each group's pacing keys and leads (simulation.pacing's scenario)
    measure_connections: bool = False  # sample the embedded services' connections (simulation.fleet)
    interventions: tuple[Intervention, ...] = ()  # what a person does during the run (simulation.interventions)

    def check(self) -> None:
        """Raise SimulationConfigError naming the first bad setting."""
        if not 1 <= self.days <= MAX_DAYS:
            raise SimulationConfigError(f"--days {self.days}: simulate 1 to {MAX_DAYS} days, e.g. --days 14")
        if not 0 <= self.sends_per_day <= MAX_SENDS_PER_DAY:
            raise SimulationConfigError(
                f"--sends-per-day {self.sends_per_day}: must be 0 to {MAX_SENDS_PER_DAY}, e.g. --sends-per-day 120")
        if self.workers_per_host < 1 or self.pool_interval_s <= 0 or self.sample_interval_s <= 0:
            raise SimulationConfigError("workers per host must be >= 1 and intervals > 0")
        if self.zone_dir is not None and not self.zone_dir.is_dir():
            raise SimulationConfigError(f"zone directory {self.zone_dir} does not exist: pass a directory of "
                                        f"<domain>.zone files")


def check_inventory(inventory: SimInventory) -> None:
    """Raise SimulationConfigError when the inventory gives the simulation nothing to run."""
    if not inventory.hosts:
        raise SimulationConfigError("the inventory has no sender hosts (group `senders`): nothing to simulate")
    if not inventory.mailboxes:
        raise SimulationConfigError("the inventory has no mailboxes (sendhost_mailboxes): nothing sends")
    for host in inventory.hosts:
        if host.pool.slots < 1:
            raise SimulationConfigError(f"host {host.name}: sendhost_pool.slots must be >= 1 to simulate its pool")
