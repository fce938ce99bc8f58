"""Capacity plan for a pool: how many Elastic IPs, how many EIP API calls, what it costs, and the quota it needs.

Pure arithmetic with every assumption named, so on-call can check the numbers by hand:

- each address retires after a budget drawn uniformly from [low, high]: mean (low + high) / 2 sends;
- every rotation parks the old address for `park_minutes`; by Little's law the parked count in steady state is
  rotations per minute x minutes parked (plus the reaper's cycle, during which a due address still waits);
- a redraw (the fresh address was on the denylist, parked, or DNSBL-listed) also parks that address, so each
  rotation parks 1 + redraw_rate addresses on average;
- the mutating EIP calls that share AWS's throttle bucket (50 tokens, refill 5/s) per rotation are: AllocateAddress
  x (1 + redraws), AssociateAddress x 1, ReleaseAddress x (1 + redraws), and with PTR on,
  ModifyAddressAttribute x 1 plus ResetAddressAttribute x 1 before release;
- every public IPv4 address costs $0.005 per hour whether it is in use or parked.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

HOURS_PER_MONTH = 730  # AWS bills a month as 730 hours
IPV4_USD_PER_HOUR = 0.005
THROTTLE_REFILL_PER_S = 5
SECONDS_PER_DAY = 86_400
EIP_QUOTA_CODE = "L-0263D0A3"


@dataclass(frozen=True)
class PlanInput:
    sends_per_day: int
    hosts: int
    slots_per_host: int
    budget: tuple[int, int] = (8, 15)
    park_minutes: int = 15
    reap_interval_minutes: float = 1.0
    # Extra allocations per rotation. 0.05 assumes AWS seldom hands a pool back an address it released; when it
    # does, as bench/reuse.py's stand-in always tries to, it measured about 1.15. Once a pool has history, use its
    # own: sendhost_pool_redraws_total / sendhost_pool_rotations_total (`pool plan --redraw-rate`).
    redraw_rate: float = 0.05
    ptr: bool = False


@dataclass(frozen=True)
class Plan:
    inputs: PlanInput
    mean_budget: float
    rotations_per_day: float
    active_eips: int
    parked_eips_steady: float
    redraw_headroom: int
    eips_needed: int
    eip_calls_per_rotation: float
    eip_calls_per_day: float
    throttle_capacity_per_day: int
    throttle_share: float
    monthly_cost_usd: float
    quota: int | None
    quota_increase_to: int | None

    def explanations(self) -> list[tuple[str, str, str]]:
        """(name, value, how it was computed) rows, one line each."""
        i = self.inputs
        rows = [
            ("mean budget", f"{self.mean_budget:g} sends", f"({i.budget[0]} + {i.budget[1]}) / 2"),
            ("rotations/day", f"{self.rotations_per_day:,.1f}",
             f"{i.sends_per_day:,} sends/day / {self.mean_budget:g} sends per address"),
            ("active EIPs", str(self.active_eips), f"{i.hosts} hosts x {i.slots_per_host} slots"),
            ("parked EIPs (steady)", f"{self.parked_eips_steady:,.1f}",
             f"{self.rotations_per_day:,.1f}/day x (1 + {i.redraw_rate:g} redraws) x "
             f"({i.park_minutes} + {i.reap_interval_minutes:g}) min parked / 1440 min"),
            ("redraw headroom", str(self.redraw_headroom), "one allocation in flight per rotating slot"),
            ("EIPs needed", str(self.eips_needed), "active + ceil(parked) + headroom"),
            ("EIP calls/rotation", f"{self.eip_calls_per_rotation:g}",
             "allocate + release per draw, associate" + (", PTR set + reset" if i.ptr else "")),
            ("EIP calls/day", f"{self.eip_calls_per_day:,.0f}",
             f"{self.throttle_share:.2%} of the throttle's {self.throttle_capacity_per_day:,}/day (5/s refill)"),
            ("monthly cost", f"${self.monthly_cost_usd:,.2f}",
             f"{self.active_eips} + {self.parked_eips_steady:,.1f} EIPs x $0.005/h x 730 h"),
        ]
        if self.quota is not None:
            verdict = ("enough" if self.quota_increase_to is None
                       else f"request an increase of {EIP_QUOTA_CODE} to {self.quota_increase_to}")
            rows.append(("EIP quota", str(self.quota), f"Service Quotas ec2/{EIP_QUOTA_CODE}: {verdict}"))
        return rows


def make_plan(inputs: PlanInput, quota: int | None = None) -> Plan:
    """The plan for `inputs`; `quota` is the region's EIP quota when known (from Service Quotas)."""
    if inputs.sends_per_day < 0 or inputs.hosts < 1 or inputs.slots_per_host < 1:
        raise ValueError("sends per day must be >= 0, hosts and slots >= 1")
    if inputs.redraw_rate < 0:
        raise ValueError("the redraw rate must be >= 0")
    mean_budget = (inputs.budget[0] + inputs.budget[1]) / 2
    rotations_per_day = inputs.sends_per_day / mean_budget
    draws_per_rotation = 1 + inputs.redraw_rate
    minutes_parked = inputs.park_minutes + inputs.reap_interval_minutes
    parked = rotations_per_day * draws_per_rotation * minutes_parked / 1440
    active = inputs.hosts * inputs.slots_per_host
    headroom = active  # at worst every slot rotates at once, each holding one incoming address
    needed = active + math.ceil(parked) + headroom
    calls_per_rotation = 2 * draws_per_rotation + 1 + (2 if inputs.ptr else 0)
    calls_per_day = rotations_per_day * calls_per_rotation
    capacity = THROTTLE_REFILL_PER_S * SECONDS_PER_DAY
    cost = (active + parked) * IPV4_USD_PER_HOUR * HOURS_PER_MONTH
    increase_to = needed if quota is not None and quota < needed else None
    return Plan(
        inputs=inputs, mean_budget=mean_budget, rotations_per_day=rotations_per_day, active_eips=active,
        parked_eips_steady=parked, redraw_headroom=headroom, eips_needed=needed,
        eip_calls_per_rotation=calls_per_rotation, eip_calls_per_day=calls_per_day,
        throttle_capacity_per_day=capacity, throttle_share=calls_per_day / capacity, monthly_cost_usd=cost,
        quota=quota, quota_increase_to=increase_to,
    )
