"""Planning a fleet from the leads it must reach: N new leads a day, each sent a sequence of K steps. How many
mailboxes and hosts that takes, from which day the fleet sends it all, and which limit decides.

Pure arithmetic with every assumption named (`sendhost pool plan --leads-per-day`, docs/aws-requirements.md):

- in steady state a day sends each day's new leads their first step, and the follow-ups of the leads that came
  before: N x (1 + (1 - r) + (1 - r)^2 + ... ) over K steps, where r is the share of each step's sends that ends
  its sequence (a reply, a bounce, an unsubscribe); r = 0 plans for nobody answering, the most sends;
- a mailbox at full volume sends the lower of its ramp's ceiling and its provider's documented daily limit
  (Google Workspace 2,000 messages a day, Exchange Online 10,000 recipients): that lower one is the limit that binds;
- every mailbox starts its ramp the same day and no day is unhealthy (warmup.schedule.plan with no history): the
  fleet sends it all from the first day its mailboxes' caps together reach the steady-state sends; until then
  leads wait, and the plan says how many the fleet can start each week;
- mailboxes are spread alike over hosts, `mailboxes_per_host` each.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import date, timedelta

from warmup.schedule import Ramp, plan

HORIZON_DAYS = 365  # a ramp that has not reached the demand in a year is reported as never reaching it


@dataclass(frozen=True)
class Demand:
    """What the fleet must send: new leads a day and the steps each gets."""

    leads_per_day: int
    steps: int
    ends_rate: float = 0.0  # share of a step's sends that ends the sequence (reply, bounce, unsubscribe)

    def __post_init__(self) -> None:
        if self.leads_per_day < 1 or self.steps < 1:
            raise ValueError("plan for at least 1 lead a day and 1 step")
        if not 0 <= self.ends_rate < 1:
            raise ValueError(f"reply rate {self.ends_rate:g} must be in [0, 1)")

    @property
    def sends_per_day(self) -> float:
        """Sends a day once every step of every day's leads is being sent (the steady state)."""
        return self.leads_per_day * sum((1 - self.ends_rate) ** k for k in range(self.steps))


@dataclass(frozen=True)
class WeekCapacity:
    """One week of the ramp: the first day of the week, the fleet's daily sends then, and the new leads a day that
    capacity starts at the steady state's mix (what the sends allow over the follow-ups already due)."""

    day_number: int
    sends_per_day: int
    leads_per_day: int


@dataclass(frozen=True)
class FleetPlan:
    demand: Demand
    ramp: Ramp
    provider: str
    provider_limit: int
    per_mailbox: int  # a mailbox's sends a day at full volume
    binding: str  # which limit sets per_mailbox: "ramp ceiling" or "<provider>'s daily limit"
    mailboxes: int
    mailboxes_per_host: int
    full_volume_day: int | None  # the day number (1: the ramp's first day) from which the fleet sends it all
    weeks: tuple[WeekCapacity, ...]

    @property
    def hosts(self) -> int:
        return math.ceil(self.mailboxes / self.mailboxes_per_host)

    @property
    def sends_per_day(self) -> int:
        return math.ceil(self.demand.sends_per_day)


def plan_fleet(demand: Demand, *, ramp: Ramp, provider: str, provider_limit: int,
               mailboxes_per_host: int) -> FleetPlan:
    """The fleet `demand` needs: mailboxes at full volume, hosts, and the ramp's day from which it sends it all."""
    if mailboxes_per_host < 1:
        raise ValueError("plan at least 1 mailbox a host")
    per_mailbox = min(ramp.ceiling, provider_limit)
    binding = "ramp ceiling" if ramp.ceiling <= provider_limit else f"{provider}'s daily limit"
    sends = math.ceil(demand.sends_per_day)
    mailboxes = max(1, math.ceil(sends / per_mailbox))
    start = date(2000, 1, 3)  # any day: a ramp depends on day numbers, not on dates
    caps = [min(day.cap, provider_limit) for day in plan(start, start + timedelta(days=HORIZON_DAYS - 1), ramp)]
    full = next((n for n, cap in enumerate(caps, start=1) if cap * mailboxes >= sends), None)
    mix = demand.sends_per_day / demand.leads_per_day  # sends per new lead a day, at the steady state
    weeks_short = ((full or HORIZON_DAYS) - 1) // 7  # the weeks before full volume, each shown by its first day
    weeks = tuple(WeekCapacity(n, caps[n - 1] * mailboxes, math.floor(caps[n - 1] * mailboxes / mix))
                  for n in range(1, 7 * weeks_short, 7))
    return FleetPlan(demand, ramp, provider, provider_limit, per_mailbox, binding, mailboxes, mailboxes_per_host,
                     full, weeks)


def fleet_rows(fleet: FleetPlan) -> list[tuple[str, str, str]]:
    """(name, value, how it was computed) rows, as `pool plan` shows them."""
    d, r = fleet.demand, fleet.ramp
    steps = " + ".join(f"{(1 - d.ends_rate) ** k:.2g}" for k in range(d.steps)) if d.ends_rate else f"{d.steps}"
    rows = [
        ("sends/day at full volume", f"{fleet.sends_per_day:,}",
         f"{d.leads_per_day:,} new leads/day x ({steps}) steps, {d.ends_rate:.0%} of each step ending its sequence"),
        ("sends/mailbox/day", str(fleet.per_mailbox),
         f"{fleet.binding} binds: ramp ceiling {r.ceiling}, {fleet.provider}'s limit {fleet.provider_limit:,}"),
        ("mailboxes", f"{fleet.mailboxes:,}", f"ceil({fleet.sends_per_day:,} / {fleet.per_mailbox})"),
        ("hosts", f"{fleet.hosts:,}", f"ceil({fleet.mailboxes:,} mailboxes / {fleet.mailboxes_per_host} a host)"),
    ]
    if fleet.full_volume_day is None:
        rows.append(("full volume from", "not within a year", "the ramp never reaches the demand"))
    else:
        rows.append(("full volume from", f"day {fleet.full_volume_day}",
                     f"week one {r.week_one_cap}/day, then +{r.step} every {r.step_days} healthy days: "
                     f"{fleet.mailboxes:,} mailboxes' caps reach {fleet.sends_per_day:,}"))
    for week in fleet.weeks:  # each a week short of full volume: some leads wait
        rows.append((f"from day {week.day_number}", f"{week.leads_per_day:,} new leads/day",
                     f"{week.sends_per_day:,} sends/day: the rest of the {d.leads_per_day:,} wait"))
    return rows


def fleet_json(fleet: FleetPlan) -> dict[str, object]:
    return {
        "leads_per_day": fleet.demand.leads_per_day, "steps": fleet.demand.steps,
        "reply_rate": fleet.demand.ends_rate, "sends_per_day": fleet.sends_per_day,
        "sends_per_mailbox": fleet.per_mailbox, "binding": fleet.binding, "provider": fleet.provider,
        "provider_daily_limit": fleet.provider_limit, "mailboxes": fleet.mailboxes, "hosts": fleet.hosts,
        "mailboxes_per_host": fleet.mailboxes_per_host, "full_volume_day": fleet.full_volume_day,
        "ramp": {"week_one_cap": fleet.ramp.week_one_cap, "step": fleet.ramp.step,
                 "step_days": fleet.ramp.step_days, "ceiling": fleet.ramp.ceiling},
        "weeks": [{"day": w.day_number, "sends_per_day": w.sends_per_day, "leads_per_day": w.leads_per_day}
                  for w in fleet.weeks],
    }
