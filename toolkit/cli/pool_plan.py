"""`sendhost pool plan`: what a sending volume needs from AWS (Elastic IPs, API calls, quotas) and what it costs."""

from __future__ import annotations

import click

from sendhost.model import BUDGET, PARK_MINUTES
from sendhost.providers import PROVIDER_PRESETS, PROVIDERS
from toolkit.app import App
from toolkit.output import emit_json, emit_table, format_option
from warmup.fleet_plan import Demand, fleet_json, fleet_rows, plan_fleet
from warmup.schedule import Ramp

DEFAULT_SLOTS = 4  # a planned host's slots, without --slots or an inventory host to copy


@click.command("plan")
@click.option("--sends-per-day", type=click.IntRange(min=0), default=None, help="Target sends per day.")
@click.option("--leads-per-day", type=click.IntRange(min=1), default=None,
              help="Plan the fleet instead: new leads a day, each sent --steps steps; says the mailboxes and hosts "
                   "it takes and from which day of their ramp it sends them all.")
@click.option("--steps", type=click.IntRange(min=1), default=3, show_default=True,
              help="With --leads-per-day: the steps of each lead's sequence.")
@click.option("--reply-rate", type=click.FloatRange(min=0, max=1, max_open=True), default=0.0, show_default=True,
              help="With --leads-per-day: the share of each step's sends that ends its sequence (a reply, a bounce, "
                   "an unsubscribe); 0 plans for nobody answering.")
@click.option("--provider", type=click.Choice(PROVIDERS), default="google", show_default=True,
              help="With --leads-per-day: the mailboxes' provider, whose documented daily limit caps a mailbox.")
@click.option("--mailboxes-per-host", type=click.IntRange(min=1), default=8, show_default=True,
              help="With --leads-per-day: mailboxes a host sends for.")
@click.option("--hosts", type=click.IntRange(min=1), default=None,
              help="Plan N alike hosts instead of the inventory's (with --slots).")
@click.option("--slots", type=click.IntRange(min=1), default=None, help="Slots per host, with --hosts.")
@click.option("--redraw-rate", type=click.FloatRange(min=0), default=0.05, show_default=True,
              help="Extra allocations per rotation (addresses rejected and parked); a pool with history has its "
                   "own: sendhost_pool_redraws_total / sendhost_pool_rotations_total.")
@click.option("--remap-price", type=click.FloatRange(min=0), default=0.10, show_default=True,
              envvar="SENDHOST_EIP_REMAP_USD", help="USD per Elastic IP remap beyond the free ones (AWS's price).")
@click.option("--free-remaps", type=click.IntRange(min=0), default=100, show_default=True,
              envvar="SENDHOST_EIP_FREE_REMAPS", help="Remaps a month AWS does not bill, per region.")
@click.option("--ipv4-price", type=click.FloatRange(min=0), default=0.005, show_default=True,
              envvar="SENDHOST_IPV4_USD_PER_HOUR", help="USD per public IPv4 address per hour (AWS's price).")
@format_option()
@click.pass_obj
def plan(app: App, sends_per_day: int | None, leads_per_day: int | None, steps: int, reply_rate: float,
         provider: str, mailboxes_per_host: int, hosts: int | None, slots: int | None, redraw_rate: float,
         remap_price: float, free_remaps: int, ipv4_price: float, fmt: str | None) -> None:
    """EIPs needed, EIP API calls per day against the throttle, monthly IPv4 and remap cost, and each region's
    EIP quota, summed over the inventory's hosts as they are (or N alike hosts with --hosts and --slots)."""
    from ippool.errors import IppoolError
    from ippool.plan import PlanInput, Prices, explanations, inventory_hosts, make_plan, to_json, uniform_hosts

    inventory = app.inventory
    first = inventory.hosts[0] if inventory is not None and inventory.hosts else None
    if (sends_per_day is None) == (leads_per_day is None):
        app.fail("pool plan: pass --sends-per-day N (the pool for a volume) or --leads-per-day N (the fleet for "
                 "new leads)", code=2)
    fleet = None
    if leads_per_day is not None:
        if hosts is not None:
            app.fail("pool plan: --leads-per-day works out the hosts itself; leave out --hosts", code=2)
        fleet = plan_fleet(Demand(leads_per_day, steps, reply_rate), ramp=Ramp(), provider=provider,
                           provider_limit=PROVIDER_PRESETS[provider].daily_limit,
                           mailboxes_per_host=mailboxes_per_host)
        sends_per_day = fleet.sends_per_day
        hosts, slots = fleet.hosts, slots or (first.pool.slots if first else DEFAULT_SLOTS)
    assert sends_per_day is not None
    if (hosts is None) != (slots is None):
        app.fail("pool plan: pass --hosts and --slots together, or neither to plan the inventory's hosts", code=2)
    if hosts is not None and slots is not None:
        loads = uniform_hosts(hosts, slots, region=first.region if first else app.config.aws_region.value or
                              "us-east-1", budget=first.pool.budget if first else BUDGET,
                              park_minutes=first.pool.park_minutes if first else PARK_MINUTES,
                              ptr=bool(first and first.pool.ptr))
    elif inventory is not None and inventory.hosts:
        loads = inventory_hosts(inventory.hosts)
    else:
        app.fail("pool plan: pass --hosts and --slots, or an inventory with sender hosts", code=2)
    result = make_plan(PlanInput(sends_per_day=sends_per_day, hosts=loads, redraw_rate=redraw_rate,
                                 prices=Prices(ipv4_price, remap_price, free_remaps)))
    from toolkit.cli.pool_wiring import make_adapter

    quotas: dict[str, int | None] = {}
    notes: list[str] = []
    for region in result.regions:  # quotas are per region: one adapter for each
        with make_adapter(app, region.region) as aws:
            try:
                quotas[region.region] = aws.eip_quota()
            except IppoolError as exc:
                quotas[region.region] = None
                notes.append(f"{region.region}: EIP quota unknown ({exc})")
    result = result.with_quotas(quotas)
    increases = [f"request an increase of ec2/L-0263D0A3 in {r.region} to {r.quota_increase_to}"
                 for r in result.regions if r.quota_increase_to]
    summary = "; ".join([f"{result.eips_needed} EIPs needed for {sends_per_day:,} sends/day, "
                         f"${result.monthly_cost_usd:,.2f}/month (remaps ${result.remap_cost_usd:,.2f})",
                         *increases, *notes])
    if fleet is not None:
        summary = (f"{fleet.mailboxes:,} mailboxes on {fleet.hosts:,} hosts for {leads_per_day:,} new leads/day, "
                   + (f"all of them from day {fleet.full_volume_day}; " if fleet.full_volume_day else "")
                   + summary)
    if app.output_format(fmt) == "json":
        emit_json({**({"fleet": fleet_json(fleet)} if fleet else {}), **to_json(result, notes), "summary": summary})
        return
    rows = [*(fleet_rows(fleet) if fleet else []), *explanations(result)]
    emit_table("pool plan", ["quantity", "value", "how"], rows, summary=summary)
