"""`sendhost pool`: inspect the Elastic IP pools of the sender hosts, as Redis holds them."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from toolkit.app import App
from toolkit.output import emit_json, emit_table, format_option

if TYPE_CHECKING:
    from ippool.status import HostStatus

STATUS_COLUMNS = ["slot", "state", "private ip", "public ip", "allocation", "used/budget", "live leases", "gen"]


@click.group("pool")
def group() -> None:
    """Inspect the IP pools (slot addresses, send budgets, live leases)."""


@group.command("status")
@click.argument("host", required=False)
@format_option()
@click.pass_obj
def status(app: App, host: str | None, fmt: str | None) -> None:
    """Slot state of HOST (default: every registered host): address, used/budget, live leases, state.

    JSON: one object for HOST ({host, primary_ip, slots: [...]}), else a list of them.
    """
    from ippool import Pool  # late: `sendhost --help` must not import the Redis client

    client = app.redis()
    try:
        hosts = Pool(client).status(host)
    finally:
        client.close()
    if app.output_format(fmt) == "json":
        # one host asked for: its object; every host: a list of them
        emit_json(hosts[0].to_json() if host is not None else [state.to_json() for state in hosts])
        return
    render_table(hosts)


def render_table(hosts: list[HostStatus]) -> None:
    """One table per host; a line saying so when no host is registered."""
    if not hosts:
        click.echo("no hosts registered in Redis")
        return
    for state in hosts:
        rows = [(s.slot, s.state, s.private_ip, s.public_ip, s.allocation_id, f"{s.used}/{s.budget}",
                 s.live_leases, s.generation) for s in state.slots]
        leasable = sum(1 for s in state.slots if s.state == "active" and s.used < s.budget)
        emit_table(f"{state.host} (primary {state.primary_ip}, budget {state.budget[0]}..{state.budget[1]})",
                   STATUS_COLUMNS, rows, summary=f"{leasable} of {len(state.slots)} slots leasable")
