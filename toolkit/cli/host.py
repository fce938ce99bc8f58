"""`sendhost host`: verify a provisioned sender host over SSH, and the probe endpoint verification talks to."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import click

from provisioning.errors import ProvisionConfigError
from provisioning.plan import ProvisionPlan, resolve_plan
from provisioning.probe import Probe, parse_endpoint
from provisioning.ssh import open_session
from provisioning.targets import load_targets
from provisioning.verify import VerifyReport, verify_host
from toolkit.app import App
from toolkit.cli.help_format import WholeHelpGroup
from toolkit.cli.provision import slot_source
from toolkit.output import emit_json, emit_table, format_option


@click.group("host", cls=WholeHelpGroup)
def group() -> None:
    """Check a sender host: slot addresses bound and presenting the right source address."""


@group.command("verify")
@click.argument("host")
@click.option("--probe", "probe_at", metavar="HOST:PORT",
              help="A `sendhost host probe` endpoint the host can reach; without it source binding is not checked.")
@click.option("--expect-public", is_flag=True,
              help="The probe is outside the VPC: each slot must arrive from its Elastic IP (from the pool), not "
              "its private address. Needs --probe.")
@click.option("--known-hosts", type=click.Path(dir_okay=False, path_type=Path),
              help="known_hosts file (default: UserKnownHostsFile in ansible_ssh_common_args, else "
              "~/.ssh/known_hosts).")
@format_option()
@click.pass_obj
def verify(app: App, host: str, probe_at: str | None, expect_public: bool, known_hosts: Path | None,
           fmt: str | None) -> None:
    """Connect to HOST over SSH (host key must already be in known_hosts) and check every slot of its IP pool.

    Slots must be bound on sendhost_interface, else on the host's default-route interface. Then opens TCP from the
    host to each mailbox's submission server (smtp host and port in the inventory).

    Exits 1 when a slot is not bound, the probe saw the wrong address, time is not synchronised, a submission
    server is not reachable from the host, the host is unreachable or its key changed; 2 when its key is unknown,
    the inventory lacks its address or key, or the host has no pool.
    """
    inventory = app.require_inventory()
    sender = inventory.host(host)
    probe = parse_endpoint(probe_at, "--probe") if probe_at else None
    if expect_public and probe is None:
        raise ProvisionConfigError("--expect-public compares what a probe sees: add --probe HOST:PORT, a "
                                   "`sendhost host probe` outside the VPC")
    target = next(t for t in load_targets(inventory.path) if t.name == sender.name)
    if known_hosts is not None:
        target = dataclasses.replace(target, known_hosts=known_hosts)
    plan = resolve_plan(sender.name, sender.interface, sender.subnet, slot_source(app))
    expected = _elastic_ips(plan) if expect_public else None
    submission = tuple(dict.fromkeys((m.smtp.host, m.smtp.port) for m in inventory.mailboxes if m.smtp))
    with open_session(target) as session:
        report = verify_host(session, plan, probe, expected, submission=submission)
    _render(report, app.output_format(fmt))
    if not report.ok:
        failed = [f"slot {s.slot} {s.address}: {s.detail}" for s in report.slots if s.status != "ok"]
        if not report.ntp.ok:
            failed.append(f"time {report.ntp.status} ({report.ntp.source})")
        failed += [f"submission {e.host}:{e.port} {e.status}: {e.detail}; {e.fix}" for e in report.egress if not e.ok]
        app.fail(f"{host}: verification failed: {'; '.join(failed)}", 1)


def _elastic_ips(plan: ProvisionPlan) -> dict[str, str]:
    """slot address -> the Elastic IP a probe outside the VPC must see; a slot without one is refused."""
    for slot, (address, public) in enumerate(zip(plan.slot_addresses, plan.elastic_ips, strict=True)):
        if not public:
            raise ProvisionConfigError(f"{plan.name}: slot {slot} ({address}) has no Elastic IP in its pool: run "
                                       f"`sendhost pool create {plan.name}`, or verify without --expect-public")
    return {address: str(public) for address, public in zip(plan.slot_addresses, plan.elastic_ips, strict=True)}


def _render(report: VerifyReport, fmt: str) -> None:
    if fmt == "json":
        emit_json({
            "host": report.host,
            "interface": report.interface,
            "ok": report.ok,
            "slots": [dataclasses.asdict(s) for s in report.slots],
            "ntp": {"status": report.ntp.status, "source": report.ntp.source, "ok": report.ntp.ok},
            "egress": [dataclasses.asdict(e) for e in report.egress],
        })
        return
    rows = [(s.slot, s.address, s.status, s.bound_on, s.seen, s.detail) for s in report.slots]
    source = f" ({report.ntp.source})" if report.ntp.source else " (no timedatectl, chronyc or ntpstat answered)"
    emit_table(f"sendhost host verify {report.host} ({report.interface})",
               ["slot", "address", "status", "bound on", "probe saw", "detail"], rows,
               summary=f"time sync: {report.ntp.status}{source}")
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
