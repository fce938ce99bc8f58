"""`sendhost host`: verify a provisioned sender host over SSH, and the probe endpoint verification talks to."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import click

from provisioning.errors import ProvisionConfigError
from provisioning.plan import inventory_slots, resolve_plan
from provisioning.probe import Probe, parse_endpoint
from provisioning.ssh import open_session
from provisioning.targets import load_targets
from provisioning.verify import VerifyReport, verify_host
from toolkit.app import App
from toolkit.output import emit_json, emit_table, format_option


@click.group("host")
def group() -> None:
    """Check a sender host: slot addresses bound and presenting the right source address."""


@group.command("verify")
@click.argument("host")
@click.option("--probe", "probe_at", metavar="HOST:PORT",
              help="A `sendhost host probe` endpoint the host can reach; without it source binding is not checked.")
@click.option("--known-hosts", type=click.Path(dir_okay=False, path_type=Path),
              help="known_hosts file (default: UserKnownHostsFile in ansible_ssh_common_args, else "
              "~/.ssh/known_hosts).")
@format_option()
@click.pass_obj
def verify(app: App, host: str, probe_at: str | None, known_hosts: Path | None, fmt: str | None) -> None:
    """Connect to HOST over SSH (host key must already be in known_hosts) and check every slot.

    Then opens TCP from the host to each mailbox's submission server (smtp host and port in the inventory).

    Exits 1 when a slot is not bound, the probe saw the wrong address, time is not synchronised, a submission
    server is not reachable from the host, the host is unreachable or its key changed; 2 when its key is unknown or
    the inventory lacks its address or key.
    """
    inventory = app.require_inventory()
    sender = inventory.host(host)
    probe = parse_endpoint(probe_at, "--probe") if probe_at else None
    target = next(t for t in load_targets(inventory.path) if t.name == sender.name)
    if known_hosts is not None:
        target = dataclasses.replace(target, known_hosts=known_hosts)
    plan = resolve_plan(sender.name, sender.interface, sender.subnet,
                        inventory_slots({h.name: h.pool.private_ips for h in inventory.hosts}))
    if not plan.slot_addresses:
        raise ProvisionConfigError(
            f"{host}: no slot addresses to verify; list them in sendhost_pool.private_ips (or create its pool)"
        )
    submission = tuple(dict.fromkeys((m.smtp.host, m.smtp.port) for m in inventory.mailboxes if m.smtp))
    with open_session(target) as session:
        report = verify_host(session, plan, probe, submission=submission)
    _render(report, app.output_format(fmt))
    if not report.ok:
        failed = [f"slot {s.slot} {s.address}: {s.detail}" for s in report.slots if s.status != "ok"]
        if not report.ntp.ok:
            failed.append(f"time {report.ntp.status} ({report.ntp.source})")
        failed += [f"submission {e.host}:{e.port} {e.status}: {e.detail}; {e.fix}" for e in report.egress if not e.ok]
        app.fail(f"{host}: verification failed: {'; '.join(failed)}", 1)


def _render(report: VerifyReport, fmt: str) -> None:
    if fmt == "json":
        emit_json({
            "host": report.host,
            "ok": report.ok,
            "slots": [dataclasses.asdict(s) for s in report.slots],
            "ntp": {"status": report.ntp.status, "source": report.ntp.source, "ok": report.ntp.ok},
            "egress": [dataclasses.asdict(e) for e in report.egress],
        })
        return
    rows = [(s.slot, s.address, s.status, s.bound_on, s.seen, s.detail) for s in report.slots]
    source = f" ({report.ntp.source})" if report.ntp.source else " (no timedatectl, chronyc or ntpstat answered)"
    emit_table(f"sendhost host verify {report.host}", ["slot", "address", "status", "bound on", "probe saw", "detail"],
               rows, summary=f"time sync: {report.ntp.status}{source}")
    _render_egress(report)


def _render_egress(report: VerifyReport) -> None:
    if not report.egress:
        click.echo("outbound submission: not checked (no mailbox in the inventory names an smtp host)")
        return
    emit_table(f"outbound submission from {report.host}", ["server", "port", "status", "detail", "fix"],
               [(e.host, e.port, e.status, e.detail, e.fix or None) for e in report.egress])


@group.command("probe")
@click.option("--listen", required=True, metavar="HOST:PORT", help="Address to listen on, e.g. 0.0.0.0:7070.")
def probe(listen: str) -> None:
    """Answer each TCP connection with the address it came from (the endpoint for `host verify --probe`)."""
    host, port = parse_endpoint(listen, "--listen")
    server = Probe(host, port)
    bound_host, bound_port = server.address
    click.echo(f"probe listening on {bound_host}:{bound_port} (Ctrl-C to stop)", err=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        click.echo("probe stopped", err=True)
