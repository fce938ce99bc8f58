"""Capacity plan for a pool: how many Elastic IPs, how many EIP API calls, what it costs, and the quota it needs.

Pure arithmetic with every assumption named, so on-call can check the numbers by hand. The plan sums the hosts as
they are (each host's slots, budget, parking, PTR and region), and AWS's limits and prices apply per region:

- sends spread over every slot of every host alike, so a host takes sends in proportion to its slots;
- each address retires after a budget drawn uniformly from [low, high]: mean (low + high) / 2 sends;
- every rotation parks the old address for `park_minutes`; by Little's law the parked count in steady state is
  rotations per minute x minutes parked (plus the reaper's cycle, during which a due address still waits);
- a redraw (the fresh address was on the denylist, parked, or DNSBL-listed) also parks that address, so each
  rotation parks 1 + redraw_rate addresses on average;
- the mutating EIP calls that share AWS's throttle bucket (50 tokens, refill 5/s, per region) per rotation are:
  AllocateAddress x (1 + redraws), AssociateAddress x 1, ReleaseAddress x (1 + redraws), and with PTR on,
  ModifyAddressAttribute x 1 plus ResetAddressAttribute x 1 before release;
- every public IPv4 address costs $0.005 per hour whether it is in use or parked;
- every rotation associates one new address with a slot's private IP: one Elastic IP *remap*. AWS bills remaps
  beyond the first 100 a month ($0.10 each at the time of writing), counted here per region. A redrawn address is
  parked without being associated, so it is no remap. At thousands of rotations a day this line dominates the bill.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from sendhost.model import BUDGET, PARK_MINUTES, SenderHost

HOURS_PER_MONTH = 730  # AWS bills a month as 730 hours
DAYS_PER_MONTH = HOURS_PER_MONTH / 24
IPV4_USD_PER_HOUR = 0.005
REMAP_USD = 0.10
FREE_REMAPS_PER_MONTH = 100
THROTTLE_REFILL_PER_S = 5
SECONDS_PER_DAY = 86_400
EIP_QUOTA_CODE = "L-0263D0A3"
DEFAULT_REGION = "us-east-1"


@dataclass(frozen=True)
class HostLoad:
    """One sender host as the plan sees it: its slots and its pool policy."""

    name: str
    slots: int
    region: str = DEFAULT_REGION
    budget: tuple[int, int] = BUDGET
    park_minutes: float = PARK_MINUTES
    ptr: bool = False

    @property
    def mean_budget(self) -> float:
        return (self.budget[0] + self.budget[1]) / 2


@dataclass(frozen=True)
class Prices:
    """AWS's prices, settable because they change (`pool plan --remap-price`, SENDHOST_EIP_REMAP_USD)."""

    ipv4_usd_per_hour: float = IPV4_USD_PER_HOUR
    remap_usd: float = REMAP_USD
    free_remaps_per_month: int = FREE_REMAPS_PER_MONTH


@dataclass(frozen=True)
class PlanInput:
    sends_per_day: int
    hosts: tuple[HostLoad, ...]
    reap_interval_minutes: float = 1.0
    # Extra allocations per rotation. 0.05 assumes AWS seldom hands a pool back an address it released; when it
    # does, as bench/reuse.py's stand-in always tries to, it measured about 1.15. Once a pool has history, use its
    # own: sendhost_pool_redraws_total / sendhost_pool_rotations_total (`pool plan --redraw-rate`).
    redraw_rate: float = 0.05
    prices: Prices = field(default_factory=Prices)


def uniform_hosts(count: int, slots: int, *, region: str = DEFAULT_REGION, budget: tuple[int, int] = BUDGET,
                  park_minutes: float = PARK_MINUTES, ptr: bool = False) -> tuple[HostLoad, ...]:
    """`count` alike hosts (`pool plan --hosts N --slots S`: a fleet that does not exist yet)."""
    return tuple(HostLoad(f"host-{n + 1}", slots, region, budget, park_minutes, ptr) for n in range(count))


def inventory_hosts(hosts: Iterable[SenderHost]) -> tuple[HostLoad, ...]:
    """The inventory's sender hosts as they are (`pool plan` without --hosts; the simulation's report)."""
    return tuple(HostLoad(h.name, h.pool.slots, h.region, h.pool.budget, h.pool.park_minutes, h.pool.ptr)
                 for h in hosts)


@dataclass(frozen=True)
class HostPlan:
    host: HostLoad
    sends_per_day: float
    rotations_per_day: float
    parked_eips_steady: float
    eip_calls_per_rotation: float


@dataclass(frozen=True)
class RegionPlan:
    """What one region needs and pays: quota, throttle and remaps are all counted per region."""

    region: str
    hosts: tuple[HostPlan, ...]
    prices: Prices
    quota: int | None = None

    @property
    def active_eips(self) -> int:
        return sum(h.host.slots for h in self.hosts)

    @property
    def rotations_per_day(self) -> float:
        return sum(h.rotations_per_day for h in self.hosts)

    @property
    def parked_eips_steady(self) -> float:
        return sum(h.parked_eips_steady for h in self.hosts)

    @property
    def redraw_headroom(self) -> int:
        return self.active_eips  # at worst every slot rotates at once, each holding one incoming address

    @property
    def eips_needed(self) -> int:
        return self.active_eips + math.ceil(self.parked_eips_steady) + self.redraw_headroom

    @property
    def eip_calls_per_day(self) -> float:
        return sum(h.rotations_per_day * h.eip_calls_per_rotation for h in self.hosts)

    @property
    def throttle_share(self) -> float:
        return self.eip_calls_per_day / (THROTTLE_REFILL_PER_S * SECONDS_PER_DAY)

    @property
    def remaps_per_month(self) -> float:
        return self.rotations_per_day * DAYS_PER_MONTH

    @property
    def remap_cost_usd(self) -> float:
        return remap_cost(self.remaps_per_month, self.prices)

    @property
    def ipv4_cost_usd(self) -> float:
        return (self.active_eips + self.parked_eips_steady) * self.prices.ipv4_usd_per_hour * HOURS_PER_MONTH

    @property
    def quota_increase_to(self) -> int | None:
        return self.eips_needed if self.quota is not None and self.quota < self.eips_needed else None


def remap_cost(remaps_per_month: float, prices: Prices) -> float:
    """Monthly remap bill: the first `free_remaps_per_month` are free, each one after costs `remap_usd`."""
    return max(0.0, remaps_per_month - prices.free_remaps_per_month) * prices.remap_usd


@dataclass(frozen=True)
class Plan:
    inputs: PlanInput
    regions: tuple[RegionPlan, ...]
    # the remap bill if every address retired at the low / the high end of its budget range
    remap_cost_at_low_budget_usd: float
    remap_cost_at_high_budget_usd: float

    @property
    def hosts(self) -> tuple[HostPlan, ...]:
        return tuple(h for r in self.regions for h in r.hosts)

    @property
    def active_eips(self) -> int:
        return sum(r.active_eips for r in self.regions)

    @property
    def rotations_per_day(self) -> float:
        return sum(r.rotations_per_day for r in self.regions)

    @property
    def mean_budget(self) -> float:
        """Sends per address over the whole fleet (a sends-weighted mean of the hosts' mean budgets)."""
        return self.inputs.sends_per_day / self.rotations_per_day if self.rotations_per_day else 0.0

    @property
    def parked_eips_steady(self) -> float:
        return sum(r.parked_eips_steady for r in self.regions)

    @property
    def eips_needed(self) -> int:
        return sum(r.eips_needed for r in self.regions)

    @property
    def eip_calls_per_day(self) -> float:
        return sum(r.eip_calls_per_day for r in self.regions)

    @property
    def remaps_per_month(self) -> float:
        return sum(r.remaps_per_month for r in self.regions)

    @property
    def ipv4_cost_usd(self) -> float:
        return sum(r.ipv4_cost_usd for r in self.regions)

    @property
    def remap_cost_usd(self) -> float:
        return sum(r.remap_cost_usd for r in self.regions)

    @property
    def monthly_cost_usd(self) -> float:
        return self.ipv4_cost_usd + self.remap_cost_usd

    def with_quotas(self, quotas: dict[str, int | None]) -> Plan:
        """The same plan with each region's EIP quota (from Service Quotas) filled in."""
        regions = tuple(RegionPlan(r.region, r.hosts, r.prices, quotas.get(r.region)) for r in self.regions)
        return Plan(self.inputs, regions, self.remap_cost_at_low_budget_usd, self.remap_cost_at_high_budget_usd)


def make_plan(inputs: PlanInput, quotas: dict[str, int | None] | None = None) -> Plan:
    """The plan for `inputs`; `quotas` maps a region to its EIP quota when known."""
    _check(inputs)
    total_slots = sum(h.slots for h in inputs.hosts)
    regions = tuple(
        RegionPlan(region, tuple(_host_plan(h, inputs, total_slots) for h in hosts), inputs.prices,
                   (quotas or {}).get(region))
        for region, hosts in _by_region(inputs.hosts))
    return Plan(inputs, regions, _remap_cost_if_every_budget_were(inputs, low=True),
                _remap_cost_if_every_budget_were(inputs, low=False))


def _check(inputs: PlanInput) -> None:
    if inputs.sends_per_day < 0:
        raise ValueError("sends per day must be >= 0")
    if not inputs.hosts or any(h.slots < 1 for h in inputs.hosts):
        raise ValueError("a plan needs at least one host, and hosts and slots >= 1")
    if inputs.redraw_rate < 0:
        raise ValueError("the redraw rate must be >= 0")
    prices = inputs.prices
    if min(prices.ipv4_usd_per_hour, prices.remap_usd, prices.free_remaps_per_month) < 0:
        raise ValueError("prices and free remaps must be >= 0")


def _by_region(hosts: Iterable[HostLoad]) -> list[tuple[str, list[HostLoad]]]:
    grouped: dict[str, list[HostLoad]] = {}
    for host in hosts:
        grouped.setdefault(host.region, []).append(host)
    return sorted(grouped.items())


def _host_plan(host: HostLoad, inputs: PlanInput, total_slots: int) -> HostPlan:
    sends = inputs.sends_per_day * host.slots / total_slots
    rotations = sends / host.mean_budget
    draws_per_rotation = 1 + inputs.redraw_rate
    parked = rotations * draws_per_rotation * (host.park_minutes + inputs.reap_interval_minutes) / 1440
    calls_per_rotation = 2 * draws_per_rotation + 1 + (2 if host.ptr else 0)
    return HostPlan(host, sends, rotations, parked, calls_per_rotation)


def _remap_cost_if_every_budget_were(inputs: PlanInput, *, low: bool) -> float:
    """The remap bill were every address to retire at one end of its host's budget range."""
    total_slots = sum(h.slots for h in inputs.hosts)
    cost = 0.0
    for _, hosts in _by_region(inputs.hosts):
        sends = (inputs.sends_per_day * h.slots / total_slots for h in hosts)
        rotations = sum(s / (h.budget[0] if low else h.budget[1]) for s, h in zip(sends, hosts, strict=True))
        cost += remap_cost(rotations * DAYS_PER_MONTH, inputs.prices)
    return cost


def explanations(plan: Plan) -> list[tuple[str, str, str]]:
    """(name, value, how it was computed) rows, one line each."""
    i, p = plan.inputs, plan.inputs.prices
    fleet = " + ".join(str(h.slots) for h in i.hosts)
    budgets = sorted({h.budget for h in i.hosts})
    budget_text = ", ".join(f"{low}..{high}" for low, high in budgets)
    rows = [
        ("mean budget", f"{plan.mean_budget:g} sends", f"budget {budget_text}: (low + high) / 2, by each host's share"),
        ("rotations/day", f"{plan.rotations_per_day:,.1f}",
         f"{i.sends_per_day:,} sends/day, spread over {fleet} slots, / each host's mean budget"),
        ("active EIPs", str(plan.active_eips), f"{len(i.hosts)} hosts: {fleet} slots"),
        ("parked EIPs (steady)", f"{plan.parked_eips_steady:,.1f}",
         f"rotations/day x (1 + {i.redraw_rate:g} redraws) x (each host's park minutes + "
         f"{i.reap_interval_minutes:g}) / 1440 min"),
        ("EIPs needed", str(plan.eips_needed), "per region: active + ceil(parked) + one incoming per slot"),
        ("EIP calls/day", f"{plan.eip_calls_per_day:,.0f}",
         "per rotation: allocate + release per draw, associate, + PTR set and reset where ptr is on"),
        ("remaps/month", f"{plan.remaps_per_month:,.0f}",
         f"one association per rotation x {DAYS_PER_MONTH:.2f} days (730 h / 24)"),
        ("remap cost/month", f"${plan.remap_cost_usd:,.2f}",
         f"per region: (remaps - {p.free_remaps_per_month} free) x ${p.remap_usd:.2f}"),
        ("remap cost by budget", f"${plan.remap_cost_at_low_budget_usd:,.2f} .. "
         f"${plan.remap_cost_at_high_budget_usd:,.2f}",
         "were every address to retire at the low .. the high end of its budget"),
        ("IPv4 cost/month", f"${plan.ipv4_cost_usd:,.2f}",
         f"{plan.active_eips} + {plan.parked_eips_steady:,.1f} EIPs x ${p.ipv4_usd_per_hour:g}/h x 730 h"),
        ("monthly cost", f"${plan.monthly_cost_usd:,.2f}", "IPv4 + remaps"),
    ]
    for region in plan.regions:
        rows.append((f"{region.region}: EIP calls/day", f"{region.eip_calls_per_day:,.0f}",
                     f"{region.throttle_share:.2%} of the throttle's "
                     f"{THROTTLE_REFILL_PER_S * SECONDS_PER_DAY:,}/day (5/s refill)"))
        if region.quota is not None:
            verdict = (f"enough for {region.eips_needed}" if region.quota_increase_to is None
                       else f"request an increase of {EIP_QUOTA_CODE} to {region.quota_increase_to}")
            rows.append((f"{region.region}: EIP quota", str(region.quota),
                         f"Service Quotas ec2/{EIP_QUOTA_CODE}: {verdict}"))
    return rows


def to_json(plan: Plan, notes: Sequence[str] = ()) -> dict[str, object]:
    """The plan's numbers, as numbers (rounded to 0.1, dollars to the cent), with its assumptions."""
    p = plan.inputs.prices
    return {
        "sends_per_day": plan.inputs.sends_per_day,
        "mean_budget": round(plan.mean_budget, 2),
        "rotations_per_day": round(plan.rotations_per_day, 1),
        "active_eips": plan.active_eips,
        "parked_eips_steady": round(plan.parked_eips_steady, 1),
        "eips_needed": plan.eips_needed,
        "eip_calls_per_day": round(plan.eip_calls_per_day, 1),
        "remaps_per_month": round(plan.remaps_per_month, 1),
        "cost_usd_per_month": {
            "ipv4": round(plan.ipv4_cost_usd, 2), "remaps": round(plan.remap_cost_usd, 2),
            "total": round(plan.monthly_cost_usd, 2),
            "remaps_at_low_budget": round(plan.remap_cost_at_low_budget_usd, 2),
            "remaps_at_high_budget": round(plan.remap_cost_at_high_budget_usd, 2),
        },
        "assumptions": {
            "ipv4_usd_per_hour": p.ipv4_usd_per_hour, "remap_usd": p.remap_usd,
            "free_remaps_per_month": p.free_remaps_per_month, "hours_per_month": HOURS_PER_MONTH,
            "redraw_rate": plan.inputs.redraw_rate, "reap_interval_minutes": plan.inputs.reap_interval_minutes,
            "sends_spread": "in proportion to each host's slots",
        },
        "regions": [{
            "region": r.region, "hosts": [h.host.name for h in r.hosts], "active_eips": r.active_eips,
            "parked_eips_steady": round(r.parked_eips_steady, 1), "eips_needed": r.eips_needed,
            "rotations_per_day": round(r.rotations_per_day, 1), "eip_calls_per_day": round(r.eip_calls_per_day, 1),
            "throttle_share": round(r.throttle_share, 4), "remaps_per_month": round(r.remaps_per_month, 1),
            "remap_cost_usd": round(r.remap_cost_usd, 2), "ipv4_cost_usd": round(r.ipv4_cost_usd, 2),
            "quota": r.quota, "quota_increase_to": r.quota_increase_to,
        } for r in plan.regions],
        "hosts": [{
            "host": h.host.name, "region": h.host.region, "slots": h.host.slots, "budget": list(h.host.budget),
            "park_minutes": h.host.park_minutes, "ptr": h.host.ptr, "sends_per_day": round(h.sends_per_day, 1),
            "rotations_per_day": round(h.rotations_per_day, 1),
            "parked_eips_steady": round(h.parked_eips_steady, 1),
        } for h in plan.hosts],
        "notes": list(notes),
        "rows": [{"name": n, "value": v, "how": h} for n, v, h in explanations(plan)],
    }
