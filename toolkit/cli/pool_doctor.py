"""`sendhost pool doctor`: the AWS network prerequisites of each sender host, each failure with its fix."""

from __future__ import annotations

from contextlib import ExitStack
from typing import TYPE_CHECKING

import click

from toolkit.app import App
from toolkit.cli.pool_wiring import make_adapter
from toolkit.output import emit_json, emit_table, format_option

if TYPE_CHECKING:
    from ippool.aws.adapter import Ec2Adapter
    from ippool.network_check import NetworkCheck

COLUMNS = ["host", "check", "status", "detail", "fix"]


@click.command("doctor")
@click.argument("hosts", nargs=-1)
@format_option()
@click.pass_obj
def doctor(app: App, hosts: tuple[str, ...], fmt: str | None) -> None:
    """Check that AWS routes each host's mail from its slots' Elastic IPs: its subnet sends 0.0.0.0/0 to an
    internet gateway (not a NAT), and its primary private IP has a public address for fallback sends.

    HOSTS default to every inventory host. Outbound 587/465 is checked from the host: `sendhost host verify`.
    Exits 1 when a check failed, 1 with another message when a check could not look (missing permission, AWS
    unreachable), 2 on an unknown host or when no AWS credentials are found (said once, with how to provide them).

    JSON: {checks: [{host, check, status (ok|failed|couldnt_check), detail, fix}], summary}.
    """
    from ippool.network_check import CheckStatus, check_host_network

    inventory = app.require_inventory()
    selected = [inventory.host(name) for name in hosts] if hosts else list(inventory.hosts)
    if not selected:
        app.fail(f"{inventory.path}: no sender hosts to check; add them to group senders", code=2)
    checks: list[NetworkCheck] = []
    with ExitStack() as stack:
        adapters: dict[str, Ec2Adapter] = {}
        for host in selected:  # one adapter per region: an instance is described in its own
            if host.region not in adapters:
                adapters[host.region] = stack.enter_context(make_adapter(app, host.region))
        for aws in adapters.values():  # no credentials: said once (exit 2), not as every check's missing permission
            aws.require_credentials(app.config.aws_profile.value)
        for host in selected:
            checks += check_host_network(adapters[host.region], host.name, host.instance_id)
    failed = [c for c in checks if c.status == CheckStatus.FAILED]
    unchecked = [c for c in checks if c.status == CheckStatus.COULDNT_CHECK]
    summary = (f"{len(checks)} check(s) on {len(selected)} host(s): {len(checks) - len(failed) - len(unchecked)} "
               f"ok, {len(failed)} failed, {len(unchecked)} could not check")
    if app.output_format(fmt) == "json":
        emit_json({"checks": [c.to_json() for c in checks], "summary": summary})
    else:
        emit_table("pool doctor", COLUMNS, [(c.host, c.name, c.status, c.detail, c.fix or None) for c in checks],
                   summary=summary)
    blind = (f"{len(unchecked)} network check(s) could not look, so nothing is known about them: "
             + "; ".join(f"{c.host} {c.name}: {c.fix}" for c in unchecked))
    if failed:
        app.fail(f"{len(failed)} network check(s) failed: " + "; ".join(f"{c.host} {c.name}: {c.fix}" for c in failed)
                 + (f"; and {blind}" if unchecked else ""))
    if unchecked:
        app.fail(blind)
