"""`sendhost pool`: create, rotate, retire, destroy and inspect the Elastic IP pools of the sender hosts."""

from __future__ import annotations

import signal
import time
from typing import TYPE_CHECKING, Any

import click

from sendhost.model import BUDGET, PARK_MINUTES
from toolkit.app import App, reads_only
from toolkit.cli.help_format import WholeHelpGroup
from toolkit.cli.pool_doctor import doctor
from toolkit.cli.pool_wiring import owner_id, pool_context
from toolkit.output import emit_json, emit_table, format_option

if TYPE_CHECKING:
    from ippool.operator_actions import HostExtras
    from ippool.status import HostStatus

STATUS_COLUMNS = ["slot", "state", "private ip", "public ip", "allocation", "used/budget", "live leases", "gen"]
ROTATION_COLUMNS = ["host", "slot", "outcome", "old ip", "new ip", "redraws", "detail"]


@click.group("pool", cls=WholeHelpGroup)
def group() -> None:
    """Elastic IP pools: create, rotate, retire, destroy, inspect, reconcile."""


group.add_command(doctor)


@reads_only
@group.command("status")
@click.argument("host", required=False)
@format_option()
@click.pass_obj
def status(app: App, host: str | None, fmt: str | None) -> None:
    """Slot state of HOST (default: every registered host): address, used/budget, live leases, state; then its
    parked EIPs with time left, denylist size and last rotation.

    JSON: one object for HOST ({host, primary_ip, slots: [...], parked, denylist_size, last_rotation}), else a list.
    """
    from ippool.denylist import Denylist  # late: `sendhost --help` must not import the Redis client
    from ippool.operator_actions import host_extras
    from ippool.records import PoolRecords
    from ippool.slot_store import SlotStore
    from sendhost.redis_conn import redis_errors

    client = app.redis()
    try:
        with redis_errors("read the pool status", client):
            hosts = SlotStore(client).status(host)
            now = time.time()
            extras = [host_extras(PoolRecords(client, time.time), Denylist(client, time.time), s.host, now)
                      for s in hosts]
    finally:
        client.close()
    if app.output_format(fmt) == "json":
        objects = [{**state.to_json(), **vars(extra)} for state, extra in zip(hosts, extras, strict=True)]
        emit_json(objects[0] if host is not None else objects)
        return
    render_table(hosts, extras, now, hint=_registration_hint(app) if not hosts else "")


def _registration_hint(app: App) -> str:
    """What registers hosts in Redis, naming the inventory's when there is one."""
    from sendhost.errors import SendhostError

    try:
        inventory = app.inventory
    except SendhostError:  # a broken inventory is not this command's business: the hint goes without its hosts
        inventory = None
    if inventory is None or not inventory.hosts:
        return "`sendhost pool create HOST` gives an inventory host its Elastic IPs and registers it"
    names = ", ".join(h.name for h in inventory.hosts)
    return (f"{inventory.path} has {names}: `sendhost pool create HOST` gives each its Elastic IPs and registers "
            f"it (`sendhost pool reconcile --fix` registers one whose addresses AWS has already)")


def render_table(hosts: list[HostStatus], extras: list[HostExtras], now: float, hint: str = "") -> None:
    """One table per host and a line on its parked EIPs, denylist and last rotation; a line when none is registered,
    with `hint` (what registers them)."""
    from ippool.states import SlotState

    if not hosts:
        click.echo(f"no hosts registered in Redis; {hint}" if hint else "no hosts registered in Redis")
        return
    for state, extra in zip(hosts, extras, strict=True):
        rows = [(s.slot, s.state, s.private_ip, s.public_ip, s.allocation_id, f"{s.used}/{s.budget}",
                 s.live_leases, s.generation) for s in state.slots]
        leasable = sum(1 for s in state.slots if s.state == SlotState.ACTIVE and s.used < s.budget)
        emit_table(f"{state.host} (primary {state.primary_ip}, budget {state.budget[0]}..{state.budget[1]})",
                   STATUS_COLUMNS, rows, summary=f"{leasable} of {len(state.slots)} slots leasable")
        parked = ", ".join(f"{p['public_ip']} ({_duration(p['seconds_left'])} left)" for p in extra.parked)
        last = f"{_duration(now - extra.last_rotation)} ago" if extra.last_rotation else "never"
        click.echo(f"parked: {len(extra.parked)}{': ' + parked if parked else ''}; "
                   f"denylist: {extra.denylist_size}; last rotation: {last}")


def _duration(seconds: float) -> str:
    seconds = max(0, int(seconds))
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


@group.command("create")
@click.argument("host")
@click.option("--slots", type=click.IntRange(min=1), default=None,
              help="Slots to create (default: the host's sendhost_pool.slots).")
@format_option()
@click.pass_obj
def create(app: App, host: str, slots: int | None, fmt: str | None) -> None:
    """Give HOST its slots: secondary private IPs, one tagged Elastic IP each, registered in Redis. Idempotent."""
    with pool_context(app) as ctx:
        spec = ctx.spec(host)
        ctx.require_ptr_zones([host])  # before anything is allocated
        records = ctx.machinery(host).lifecycle().create(spec, slots or spec.pool.slots)
    created = sum(1 for r in records if r.action == "created")
    summary = f"{host}: {len(records)} slots, {created} created, {len(records) - created} already in place"
    if app.output_format(fmt) == "json":
        emit_json({"host": host, "slots": [r.to_json() for r in records], "summary": summary})
        return
    emit_table(f"{host} pool", ["slot", "private ip", "public ip", "allocation", "action"],
               [(r.slot, r.private_ip, r.public_ip, r.allocation_id, r.action) for r in records], summary=summary)


@group.command("rotate")
@click.argument("host")
@click.option("--slot", "slots", type=click.IntRange(min=0), multiple=True, help="Slot to rotate (repeatable; "
              "default: every slot).")
@click.option("--timeout", "timeout_s", type=click.FloatRange(min=0), default=120.0, show_default=True,
              help="Seconds to wait for live leases to end.")
@click.option("--force", is_flag=True, help="Do not wait: drop live leases and rotate now.")
@format_option()
@click.pass_obj
def rotate(app: App, host: str, slots: tuple[int, ...], timeout_s: float, force: bool, fmt: str | None) -> None:
    """Rotate HOST's slots now: no new leases on them, then a fresh address once their leases end."""
    from ippool.operator_actions import rotate_now
    from ippool.states import RotationOutcome

    with pool_context(app) as ctx:
        ctx.require_ptr_zones([host])  # before a fresh address is allocated
        results = rotate_now(ctx.machinery(host).rotator(owner_id()), host, list(slots) or None, timeout_s=timeout_s,
                             force=force, sleep=time.sleep)
    rotated = sum(1 for r in results if r.outcome == RotationOutcome.ROTATED)
    summary = f"{host}: rotated {rotated} of {len(results)} slot(s)"
    _emit_rotations(app, fmt, results, summary)
    if rotated < len(results):
        app.fail(f"{host}: {len(results) - rotated} slot(s) not rotated (see the detail column)")


def _emit_rotations(app: App, fmt: str | None, results: list[Any], summary: str) -> None:
    if app.output_format(fmt) == "json":
        emit_json({"rotations": [r.to_json() for r in results], "summary": summary})
        return
    emit_table("rotations", ROTATION_COLUMNS,
               [(r.host, r.slot, r.outcome, r.old_ip, r.new_ip, len(r.redraws), r.detail) for r in results],
               summary=summary)


@group.command("retire")
@click.option("--ip", "address", required=True, help="The public address to take out of service.")
@click.option("--reason", required=True, help="Why (kept in the log), e.g. 'listed on zen.spamhaus.org'.")
@format_option()
@click.pass_obj
def retire(app: App, address: str, reason: str, fmt: str | None) -> None:
    """Take a burned or blocklisted address out of service now and deny it for 7 days."""
    import logging

    from ippool.operator_actions import retire_address
    from ippool.states import SlotState

    with pool_context(app, need_aws=False, need_inventory=False) as ctx:
        machinery = ctx.pools.shared  # Redis only: no region's AWS is asked
        retired = retire_address(machinery.slots, machinery.denylist, machinery.records, address, reason)
    logging.getLogger("ippool").warning("retired %s: %s", address, reason)
    where = f"{retired.host} slot {retired.slot}" if retired.slot is not None else f"{retired.host} (parked)"
    summary = (f"{address} ({where}) takes no new leases and is denied for 7 days; state now {retired.state}"
               + ("; it rotates when its live leases end" if retired.state == SlotState.RETIRING else ""))
    if app.output_format(fmt) == "json":
        emit_json({**retired.to_json(), "summary": summary})
        return
    click.echo(summary)


@group.command("destroy")
@click.argument("host")
@click.option("--yes", is_flag=True, help="Do not ask: what a script must pass (without a terminal, destroy "
              "refuses to run without it).")
@format_option()
@click.pass_obj
def destroy(app: App, host: str, yes: bool, fmt: str | None) -> None:
    """Return every Elastic IP of HOST (PTR reset, released, denied), unassign its slot IPs, forget it in Redis.
    Asks first on a terminal; elsewhere needs --yes (exit 2 without it, nothing touched)."""
    import sys

    if not yes:
        if not sys.stdin.isatty():
            app.fail(f"pool destroy releases every Elastic IP of {host} and cannot be undone: pass --yes to confirm "
                     f"(there is no terminal to ask on)", code=2)
        click.confirm(f"Release every Elastic IP of {host} (PTRs reset, addresses denied for 7 days, the host "
                      f"forgotten in Redis)? This cannot be undone", abort=True)
    with pool_context(app) as ctx:
        returned = ctx.machinery(host).lifecycle().destroy(ctx.spec(host))
    summary = f"{host}: released {len(returned)} Elastic IP(s); no address of the host is left in AWS or Redis"
    if app.output_format(fmt) == "json":
        emit_json({"host": host, "released": [a.public_ip for a in returned], "summary": summary})
        return
    emit_table(f"{host} released", ["public ip", "allocation", "state"],
               [(a.public_ip, a.allocation_id, a.state) for a in returned], summary=summary)


@group.command("worker")
@click.option("--once", is_flag=True, help="Run one cycle and exit.")
@click.option("--interval", "interval_s", type=click.FloatRange(min=0), default=10.0, show_default=True,
              help="Seconds to sleep after each cycle.")
@format_option()
@click.pass_obj
def worker(app: App, once: bool, interval_s: float, fmt: str | None) -> None:
    """Rotate ready slots and reap parked EIPs of every inventory host, in a loop. SIGTERM finishes the step in
    hand and exits."""
    from ippool.states import RotationOutcome
    from ippool.worker_loop import CycleReport

    with pool_context(app) as ctx:
        ctx.require_ptr_zones()  # before the first rotation allocates
        for aws in ctx.pools.adapters():
            aws.on_throttle = ctx.pools.shared.records.throttled
        runner = ctx.pools.worker(owner_id(), interval_s=interval_s)
        signal.signal(signal.SIGTERM, lambda signum, frame: runner.stop())
        reports: list[CycleReport] = []
        runner.run(once=once, on_cycle=reports.append)
    if not once:
        return
    report = reports[-1] if reports else CycleReport([], [], [])
    fixed = runner.reconciled if isinstance(runner.reconciled, list) else []
    rotated = sum(1 for r in report.rotations if r.outcome == RotationOutcome.ROTATED)
    summary = (f"reconcile fixed {len(fixed)}, {rotated} rotated, "
               f"{sum(1 for r in report.reaped if r.released)} released, {len(report.errors)} error(s)")
    if app.output_format(fmt) == "json":
        emit_json({"reconciled": [d.to_json() for d in fixed], **report.to_json(), "summary": summary})
    else:
        _emit_rotations(app, fmt, report.rotations, summary)
    if report.errors:
        app.fail("; ".join(report.errors))


@group.command("reconcile")
@click.argument("host", required=False)
@click.option("--fix", is_flag=True, help="Finish or roll back half-done steps and rebuild Redis from AWS tags.")
@click.option("--grace", "grace_s", type=click.FloatRange(min=0), default=120.0, show_default=True,
              help="Seconds a rotation whose worker stopped answering is left alone before it counts as abandoned.")
@format_option()
@click.pass_obj
def reconcile(app: App, host: str | None, fix: bool, grace_s: float, fmt: str | None) -> None:
    """Compare AWS (tags, associations) with Redis for HOST (default: every inventory host); exit 1 when a
    difference remains (without --fix, every difference found)."""
    with pool_context(app) as ctx:
        hosts = [ctx.spec(host).name] if host else None
        differences = ctx.pools.reconcile(hosts, fix=fix, grace_s=grace_s)
    open_count = sum(1 for d in differences if not d.fixed)
    if not differences:
        summary = "AWS and Redis agree"
    elif fix:
        summary = f"{len(differences)} difference(s), {len(differences) - open_count} fixed, {open_count} open"
    else:  # each detail ends with what --fix does ("rolled back", "rebuilt"): none of it happened
        summary = (f"{len(differences)} difference(s), nothing changed: a dry run; `--fix` does what each detail "
                   f"ends with")
    if app.output_format(fmt) == "json":
        emit_json({"differences": [d.to_json() for d in differences], "dry_run": not fix, "summary": summary})
    else:
        emit_table("reconcile", ["host", "kind", "subject", "detail" if fix else "detail: what --fix does", "fixed"],
                   [(d.host, d.kind, d.subject, d.detail, "yes" if d.fixed else "no" if fix else "no (dry run)")
                    for d in differences], summary=summary)
    if open_count:
        app.fail(f"{open_count} difference(s) left: run `sendhost pool reconcile --fix`" if not fix else
                 f"{open_count} difference(s) need a person (see the detail column)")


@group.command("plan")
@click.option("--sends-per-day", type=click.IntRange(min=0), required=True, help="Target sends per day.")
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
def plan(app: App, sends_per_day: int, hosts: int | None, slots: int | None, redraw_rate: float,
         remap_price: float, free_remaps: int, ipv4_price: float, fmt: str | None) -> None:
    """EIPs needed, EIP API calls per day against the throttle, monthly IPv4 and remap cost, and each region's
    EIP quota, summed over the inventory's hosts as they are (or N alike hosts with --hosts and --slots)."""
    from ippool.errors import IppoolError
    from ippool.plan import PlanInput, Prices, explanations, inventory_hosts, make_plan, to_json, uniform_hosts

    inventory = app.inventory
    first = inventory.hosts[0] if inventory is not None and inventory.hosts else None
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
    if app.output_format(fmt) == "json":
        emit_json({**to_json(result, notes), "summary": summary})
        return
    emit_table("pool plan", ["quantity", "value", "how"], explanations(result), summary=summary)


@group.command("exporter")
@click.option("--listen", default="127.0.0.1:9464", show_default=True, metavar="HOST:PORT",
              help="Address to serve /metrics on.")
@click.pass_obj
def exporter(app: App, listen: str) -> None:
    """Serve the pool's and the warm-up guard's Prometheus metrics (read from Redis at each scrape) until SIGTERM
    or Ctrl-C."""
    import threading

    from prometheus_client import CollectorRegistry, start_http_server

    from ippool.metrics import PoolCollector
    from warmup import Guard
    from warmup.metrics import WarmupCollector

    address, _, port = listen.rpartition(":")
    if not address or not port.isdigit() or not 0 < int(port) < 65536:
        app.fail(f"--listen {listen!r}: expected HOST:PORT, e.g. 127.0.0.1:9464", code=2)
    client = app.redis()
    registry = CollectorRegistry(auto_describe=False)
    registry.register(PoolCollector(client))
    registry.register(WarmupCollector(Guard(client)))
    try:
        server, thread = start_http_server(int(port), addr=address.strip("[]"), registry=registry)
    except OSError as exc:
        client.close()
        app.fail(f"--listen {listen}: cannot listen there ({exc.strerror})", code=2)
    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda signum, frame: stopped.set())
    click.echo(f"serving metrics on http://{listen}/metrics", err=True)
    try:
        stopped.wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
        client.close()


@group.command("sender-acl")
@click.argument("host")
@click.option("--group", "groups", multiple=True, metavar="GROUP",
              help="A warm-up group HOST sends for (repeatable); default: the inventory's sendhost_mailbox_groups "
                   "of HOST, else every group.")
@click.option("--apply", "apply_", is_flag=True,
              help="Load sendhost's function library and create or replace the user on the configured Redis (an "
                   "admin URL), with the password in SENDHOST_SENDER_REDIS_PASSWORD.")
@click.pass_obj
def sender_acl(app: App, host: str, groups: tuple[str, ...], apply_: bool) -> None:
    """Print the Redis ACL rule of HOST's sender user: what the sender agent runs (sendhost's functions, leases on
    its own host, the warm-up guard of its groups), on the keys it runs it on, nothing else (docs/security.md;
    Redis >= 7.0). The password shows as >PASSWORD; --apply sets it from the environment (`sendhost provision`
    applies it itself)."""
    import os

    from ippool.keys import check_host_name
    from ippool.sender_acl import apply_sender_acl, sender_acl_command
    from sendhost.redis_conn import redis_errors

    try:
        check_host_name(host)
        served = _served_groups(app, host, groups)
        if not apply_:
            click.echo(sender_acl_command(host, served))
            return
    except ValueError as exc:
        app.fail(str(exc), code=2)
    password = os.environ.get("SENDHOST_SENDER_REDIS_PASSWORD", "")
    if not password:
        app.fail("--apply needs the sender's password in SENDHOST_SENDER_REDIS_PASSWORD (from your secret store)",
                 code=2)
    client = app.redis()
    try:
        with redis_errors(f"create the ACL user of {host}'s sender", client):
            user = apply_sender_acl(client, host, password, served)
    except ValueError as exc:  # a Redis too old for the rule
        app.fail(str(exc), code=2)
    finally:
        client.close()
    click.echo(f"{user}: ACL user set on Redis (its URL: redis[s]://{user}:***@<your Redis>)")


def _served_groups(app: App, host: str, groups: tuple[str, ...]) -> tuple[str, ...] | None:
    """The warm-up groups of HOST's grant: --group, else its inventory's, else None (every group)."""
    if groups:
        return groups
    inventory = app.inventory
    if inventory is None or not any(h.name == host for h in inventory.hosts):
        return None
    return inventory.mailbox_groups_of(inventory.host(host))
