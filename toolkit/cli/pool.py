"""`sendhost pool`: create, rotate, retire, destroy and inspect the Elastic IP pools of the sender hosts."""

from __future__ import annotations

import signal
import time
from typing import TYPE_CHECKING, Any

import click

from toolkit.app import App
from toolkit.cli.pool_wiring import pool_context
from toolkit.output import emit_json, emit_table, format_option

if TYPE_CHECKING:
    from ippool.oncall import HostExtras
    from ippool.status import HostStatus

STATUS_COLUMNS = ["slot", "state", "private ip", "public ip", "allocation", "used/budget", "live leases", "gen"]
ROTATION_COLUMNS = ["host", "slot", "outcome", "old ip", "new ip", "redraws", "detail"]


@click.group("pool")
def group() -> None:
    """Elastic IP pools: create, rotate, retire, destroy, inspect, reconcile."""


@group.command("status")
@click.argument("host", required=False)
@format_option()
@click.pass_obj
def status(app: App, host: str | None, fmt: str | None) -> None:
    """Slot state of HOST (default: every registered host): address, used/budget, live leases, state; then its
    parked EIPs with time left, denylist size and last rotation.

    JSON: one object for HOST ({host, primary_ip, slots: [...], parked, denylist_size, last_rotation}), else a list.
    """
    from ippool import Pool  # late: `sendhost --help` must not import the Redis client
    from ippool.denylist import Denylist
    from ippool.ledger import Ledger
    from ippool.oncall import host_extras

    client = app.redis()
    try:
        hosts = Pool(client).status(host)
        now = time.time()
        extras = [host_extras(Ledger(client, time.time), Denylist(client, time.time), s.host, now) for s in hosts]
    finally:
        client.close()
    if app.output_format(fmt) == "json":
        objects = [{**state.to_json(), **vars(extra)} for state, extra in zip(hosts, extras, strict=True)]
        emit_json(objects[0] if host is not None else objects)
        return
    render_table(hosts, extras, now)


def render_table(hosts: list[HostStatus], extras: list[HostExtras], now: float) -> None:
    """One table per host and a line on its parked EIPs, denylist and last rotation; a line when none is registered."""
    if not hosts:
        click.echo("no hosts registered in Redis")
        return
    for state, extra in zip(hosts, extras, strict=True):
        rows = [(s.slot, s.state, s.private_ip, s.public_ip, s.allocation_id, f"{s.used}/{s.budget}",
                 s.live_leases, s.generation) for s in state.slots]
        leasable = sum(1 for s in state.slots if s.state == "active" and s.used < s.budget)
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
        records = ctx.provisioner().create(spec, slots or spec.slots)
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
    from ippool.oncall import rotate_now

    with pool_context(app) as ctx:
        ctx.spec(host)
        results = rotate_now(ctx.rotator(), host, list(slots) or None, timeout_s=timeout_s, force=force,
                             sleep=time.sleep)
    rotated = sum(1 for r in results if r.outcome == "rotated")
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

    from ippool.oncall import retire_address

    with pool_context(app, need_aws=False, need_inventory=False) as ctx:
        retired = retire_address(ctx.pool, ctx.denylist, ctx.ledger, address, reason)
    logging.getLogger("ippool").warning("retired %s: %s", address, reason)
    where = f"{retired.host} slot {retired.slot}" if retired.slot is not None else f"{retired.host} (parked)"
    summary = (f"{address} ({where}) takes no new leases and is denied for 7 days; state now {retired.state}"
               + ("; it rotates when its live leases end" if retired.state == "retiring" else ""))
    if app.output_format(fmt) == "json":
        emit_json({**retired.to_json(), "summary": summary})
        return
    click.echo(summary)


@group.command("destroy")
@click.argument("host")
@format_option()
@click.pass_obj
def destroy(app: App, host: str, fmt: str | None) -> None:
    """Return every Elastic IP of HOST (PTR reset, released, denied), unassign its slot IPs, forget it in Redis."""
    with pool_context(app) as ctx:
        returned = ctx.provisioner().destroy(ctx.spec(host))
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
    from ippool.worker import CycleReport, Worker

    with pool_context(app) as ctx:
        hosts = list(ctx.specs)
        runner = Worker(ctx.rotator(), ctx.reaper(), hosts, interval_s=interval_s, reconcile=_reconciler(ctx))
        signal.signal(signal.SIGTERM, lambda signum, frame: runner.stop())
        reports: list[CycleReport] = []
        runner.run(once=once, on_cycle=reports.append)
    if not once:
        return
    report = reports[-1] if reports else CycleReport([], [], [])
    summary = (f"{sum(1 for r in report.rotations if r.outcome == 'rotated')} rotated, "
               f"{sum(1 for r in report.reaped if r.released)} released, {len(report.errors)} error(s)")
    if app.output_format(fmt) == "json":
        emit_json({**report.to_json(), "summary": summary})
    else:
        _emit_rotations(app, fmt, report.rotations, summary)
    if report.errors:
        app.fail("; ".join(report.errors))


def _reconciler(ctx: Any) -> Any:
    """The reconcile the worker runs at start (none until the reconcile module exists)."""
    return None
