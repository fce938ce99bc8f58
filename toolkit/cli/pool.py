"""`sendhost pool`: create, rotate, retire, destroy and inspect the Elastic IP pools of the sender hosts."""

from __future__ import annotations

import signal
import time
from typing import TYPE_CHECKING, Any

import click

from toolkit.app import App, reads_only
from toolkit.cli.help_format import WholeHelpGroup
from toolkit.cli.pool_doctor import doctor
from toolkit.cli.pool_plan import plan
from toolkit.cli.pool_serving import exporter, sender_acl
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
group.add_command(plan)
group.add_command(exporter)
group.add_command(sender_acl)


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
