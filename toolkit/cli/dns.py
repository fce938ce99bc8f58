"""`sendhost dns`: audit sending domains' DNS (for CI and for people) and check one message's headers."""

from __future__ import annotations

import asyncio
import ipaddress
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from toolkit.app import App
from toolkit.cli.help_format import WholeHelpGroup
from toolkit.output import emit_json, emit_table

if TYPE_CHECKING:
    from dns_audit.audit import DomainTarget
    from dns_audit.placement import Delivered
    from dns_audit.resolver import LiveResolver, Resolver
    from toolkit.inventory import Inventory

EXIT_HELP = """\b
Exit codes:
  0  no findings at or above --fail-on
  1  findings at or above --fail-on
  2  the audit could not run (bad input, no nameserver answering)"""
AUDIT_EXIT_HELP = EXIT_HELP.replace(
    "answering)", "answering, no data\n     for any domain: the report, with audit.no_data, is still written)")


@click.group("dns", cls=WholeHelpGroup)
def group() -> None:
    """Audit SPF, DKIM, DMARC, PTR, MX/TLS, MTA-STS, TLS-RPT and DNSBLs of sending domains."""


def _resolver(nameservers: tuple[str, ...], zone_dir: str | None, timeout: float,
              retries: int) -> tuple[Resolver, LiveResolver | None]:
    from dns_audit.resolver import LiveResolver, parse_nameserver, system_nameservers
    from dns_audit.zonefile import ZoneResolver

    parsed = [parse_nameserver(ns) for ns in nameservers]
    live: LiveResolver | None = None
    if parsed or zone_dir is None:
        live = LiveResolver(parsed or system_nameservers(), timeout=timeout, retries=retries)
    if zone_dir is not None:
        return ZoneResolver(Path(zone_dir), fallback=live), live
    assert live is not None
    return live, live


# EC2 private (VPC) and carrier-grade NAT addresses: receivers never see them, so they are never audited as
# sending IPs (a host's primary private IP is not the address its mail leaves from).
_PRIVATE_NETWORKS = tuple(ipaddress.ip_network(n) for n in (
    "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "169.254.0.0/16", "fc00::/7", "fe80::/10"))


def _is_private(ip: str) -> bool:
    address = ipaddress.ip_address(ip)
    return any(address in network for network in _PRIVATE_NETWORKS if network.version == address.version)


def _sending_ips(app: App, inventory: Inventory) -> tuple[list[str], list[str]]:
    """(addresses to audit, private addresses left out). Each sender host's pool addresses (the Elastic IPs
    recipients see) when it has a pool in the configured Redis, else its primary IP when that is public. Without
    a configured Redis no pool can exist, so nothing is started to look."""
    url = app.config.redis_url.value or inventory.redis_url
    pool_ips: dict[str, list[str]] = {}
    if url:
        from dns_audit.errors import AuditError
        from ippool.errors import PoolConfigError, PoolOperationFailed
        from ippool.pool import Pool
        from sendhost.masking import mask_url

        pool = Pool.from_url(url)
        try:
            for host in inventory.hosts:
                try:
                    (state,) = pool.status(host.name)
                except PoolConfigError:  # not registered: no pool for this host
                    continue
                pool_ips[host.name] = [slot.public_ip for slot in state.slots if slot.public_ip]
        except PoolOperationFailed as exc:
            raise AuditError(f"cannot read the IP pools from {mask_url(url)} ({exc}); start Redis, or name the "
                             "sending IPs with --ip") from None
        finally:
            pool.close()
    candidates = [ip for host in inventory.hosts for ip in (pool_ips.get(host.name) or [host.primary_ip])]
    return [ip for ip in candidates if not _is_private(ip)], [ip for ip in candidates if _is_private(ip)]


def _explicit_inventory(app: App, inventory_path: str | None) -> Inventory | None:
    """The inventory only when asked for (`--inventory` here or globally, or SENDHOST_INVENTORY): a
    ./inventory.yml lying in the working directory never replaces the domains the command line names."""
    from toolkit.config import resolve_inventory_path
    from toolkit.inventory import load_inventory

    if inventory_path:
        return load_inventory(Path(inventory_path))
    setting = resolve_inventory_path(app.inventory_flag, app.env)
    return app.inventory if setting.value and setting.source != "default" else None


def _with_tracking(targets: list[DomainTarget], campaigns: tuple[str, ...]) -> list[DomainTarget]:
    """Each campaign's tracking domain, checked with the audited domain it is a name under (the longest such),
    else with the first domain audited."""
    import dataclasses

    from sender.campaigns.spec import load_campaign

    for path in campaigns:
        tracking = load_campaign(Path(path)).tracking
        if not tracking.on or tracking.domain is None or not targets:
            continue
        domain = tracking.domain
        under = [t for t in targets if domain == t.domain or domain.endswith("." + t.domain)]
        index = targets.index(max(under, key=lambda t: len(t.domain))) if under else 0
        targets[index] = dataclasses.replace(targets[index],
                                             tracking_domains=(*targets[index].tracking_domains, domain))
    return targets


def _targets(app: App, domains: tuple[str, ...], inventory_path: str | None, zone_origins: list[str],
             selectors: tuple[str, ...], ips: tuple[str, ...], envelope: str | None,
             mode: str | None) -> tuple[list[DomainTarget], tuple[str, ...]]:
    from dns_audit.audit import DomainTarget, normalize_domain, normalize_ip
    from dns_audit.errors import AuditError
    from dns_audit.findings import Location

    ip_list = tuple(normalize_ip(ip) for ip in ips)
    envelope_domain = normalize_domain(envelope) if envelope else None
    names = [normalize_domain(d) for d in domains]

    def from_command_line(name: str) -> DomainTarget:
        return DomainTarget(name, selectors, ip_list, envelope_domain, mode or "submission")

    inventory = _explicit_inventory(app, inventory_path)
    if inventory is None:
        if names:
            return [from_command_line(n) for n in names], ()
        if zone_origins:
            return [from_command_line(normalize_domain(o)) for o in zone_origins if not o.endswith(".arpa")], ()
        raise AuditError("no domains to audit: name them (sendhost dns audit example.com), pass --inventory PATH, "
                         "or --zone-dir DIR")
    if not inventory.domains:
        raise AuditError(f"{inventory.path}: no sendhost_domains to audit; add them, or name domains without "
                         "--inventory")
    declared = {normalize_domain(d.name): d for d in inventory.domains}
    from_inventory = [n for n in names or list(declared) if n in declared]
    if selectors and from_inventory:
        raise AuditError(f"--selector names the DKIM selectors of domains given without an inventory; the domains "
                         f"of {inventory.path} use their dkim_selectors: edit them there")
    host_ips: tuple[str, ...] = ip_list
    if not ip_list:
        public, private = _sending_ips(app, inventory)
        host_ips = tuple(normalize_ip(ip) for ip in public)
        if private:
            click.echo(f"note: not audited as sending IPs (private addresses receivers never see): "
                       f"{', '.join(private)}", err=True)
    targets = []
    for name in names or list(declared):
        d = declared.get(name)
        if d is None:
            targets.append(from_command_line(name))
            continue
        targets.append(DomainTarget(
            name, d.dkim_selectors, host_ips,
            normalize_domain(d.envelope_domain) if d.envelope_domain else envelope_domain,
            mode or d.sending_mode, tuple(d.spf_includes), d.dmarc_floor,
            Location(str(inventory.path), d.line) if d.line else None))
    if from_inventory:
        click.echo(f"note: auditing {len(from_inventory)} domain(s) from the inventory {inventory.path}", err=True)
    return targets, inventory.dnsbl


@group.command("audit", epilog=AUDIT_EXIT_HELP)
@click.argument("domains", nargs=-1)
@click.option("--inventory", "inventory_path", metavar="PATH", help="Audit the inventory's sendhost_domains.")
@click.option("--zone-dir", metavar="DIR", help="Audit zone files offline (<origin>.zone each); file:line in findings.")
@click.option("--nameserver", "nameservers", multiple=True, metavar="HOST[:PORT]",
              help="Nameserver to ask (repeatable; default: /etc/resolv.conf). With --zone-dir: for names outside.")
@click.option("--selector", "selectors", multiple=True, metavar="SEL", help="DKIM selector to check (repeatable).")
@click.option("--ip", "ips", multiple=True, metavar="ADDRESS", help="Sending IP: SPF, PTR, DNSBL (repeatable).")
@click.option("--envelope-domain", metavar="DOMAIN", help="Return-Path domain (default: the domain itself).")
@click.option("--profile", type=click.Choice(["gmail-bulk", "baseline"]), default="gmail-bulk", show_default=True,
              help="gmail-bulk adds DMARC and alignment to the all-senders baseline.")
@click.option("--smtp-port", type=click.IntRange(1, 65535), default=25, show_default=True,
              help="Port of MX hosts for the STARTTLS check.")
@click.option("--ca-file", type=click.Path(exists=True, dir_okay=False),
              help="Trust anchors (PEM) for MX certificates.")
@click.option("--dnsbl", "dnsbl_zones", multiple=True, metavar="ZONE",
              help="DNSBL zone for IPs and the domain (repeatable; default: Spamhaus ZEN/DBL, SpamCop, Barracuda).")
@click.option("--concurrency", type=click.IntRange(1, 1000), default=20, show_default=True,
              help="Domains audited at once.")
@click.option("--timeout", type=click.FloatRange(0.01, 60), default=2.0, show_default=True,
              help="Seconds per DNS query attempt and per SMTP step.")
@click.option("--retries", type=click.IntRange(0, 10), default=2, show_default=True, help="Retries per DNS query.")
@click.option("--deadline", type=click.FloatRange(0.1, 3600), default=60.0, show_default=True,
              help="Seconds for one whole domain.")
@click.option("--format", "fmt", type=click.Choice(["table", "json", "junit", "sarif", "github"]), default=None,
              help="Output format (default: the global --format, else table).")
@click.option("--fail-on", type=click.Choice(["error", "warning"]), default="error", show_default=True,
              help="Exit 1 when a finding is at or above this severity.")
@click.option("--sending-mode", type=click.Choice(["submission", "direct"]), default=None,  # dns_audit SendingMode
              help="submission (default; the inventory's sending_mode per domain): --ip addresses submit through "
                   "the mailbox provider; direct: they deliver to MX and must pass SPF and PTR.")
@click.option("--waive", "waivers", multiple=True, metavar="CODE",
              help="Do not count findings with this code (e.g. ptr.skipped) against the gate; printed as waived.")
@click.option("--campaign", "campaigns", multiple=True, metavar="FILE", type=click.Path(dir_okay=False),
              help="A campaign file whose tracking domain to check: resolves, HTTPS valid for the name, on no URI "
                   "blocklist of the --dnsbl zones (repeatable; docs/tracking.md).")
@click.option("--tracking-port", type=click.IntRange(1, 65535), default=443, show_default=True,
              help="The port a tracking domain's HTTPS is probed on.")
@click.option("--placement", is_flag=True,
              help="Also the placement tests' verdicts that contradict the DNS: each mailbox's latest messages as "
                   "the seeds' providers judged them (DKIM failed or unaligned, SPF softfail, DMARC fail), from "
                   "the send ledger (docs/placement.md).")
@click.option("--database-url", metavar="URL", help="With --placement: the ledger's PostgreSQL "
                                                    "(env SENDHOST_DATABASE_URL).")
@click.pass_obj
def audit(app: App, domains: tuple[str, ...], inventory_path: str | None, zone_dir: str | None,
          nameservers: tuple[str, ...], selectors: tuple[str, ...], ips: tuple[str, ...], envelope_domain: str | None,
          profile: str, smtp_port: int, ca_file: str | None, dnsbl_zones: tuple[str, ...], concurrency: int,
          timeout: float, retries: int, deadline: float, fmt: str | None, fail_on: str, sending_mode: str | None,
          waivers: tuple[str, ...], campaigns: tuple[str, ...], tracking_port: int, placement: bool,
          database_url: str | None) -> None:
    """Audit each domain's mail DNS and MX TLS; findings have stable codes (spf.lookup_limit, dkim.weak_key, ...)."""
    from dns_audit.audit import AuditOptions, run_audit
    from dns_audit.dnsbl import DEFAULT_DOMAIN_ZONES, DEFAULT_IP_ZONES
    from dns_audit.errors import AuditError
    from dns_audit.findings import CATALOG, at_or_above, waive
    from dns_audit.report import render
    from dns_audit.resolver import covers, describe
    from dns_audit.tls import TlsProbe

    unknown = [code for code in waivers if code not in CATALOG]
    if unknown:
        raise AuditError(f"--waive {unknown[0]}: no such finding code (see docs/dns-audit.md for the codes)")
    resolver, live = _resolver(nameservers, zone_dir, timeout, retries)
    origins = list(getattr(resolver, "origins", []))
    targets, inventory_dnsbl = _targets(app, domains, inventory_path, origins, selectors, ips, envelope_domain,
                                        sending_mode)
    targets = _with_tracking(targets, campaigns)
    # A finding's zone line is its own record's; one about an absent record has none (a zone file's first line is
    # no record of it). Only an inventory line declaring the domain stands in (targets' declared_at).
    no_data = not any(covers(resolver, t.domain) for t in targets)
    zones = tuple(dnsbl_zones) or tuple(inventory_dnsbl)
    network = live is not None  # offline zone-file audits probe no MX host and ask no blocklist
    options = AuditOptions(
        profile=profile,
        ip_zones=zones or (DEFAULT_IP_ZONES if network else ()),
        domain_zones=zones or (DEFAULT_DOMAIN_ZONES if network else ()),
        tls=TlsProbe(port=smtp_port, ca_file=ca_file, timeout=max(timeout * 3, 1.0)) if network else None,
        concurrency=concurrency,
        deadline=deadline,
        https_port=tracking_port,
    )
    done = [0]

    def progress(_report: object) -> None:
        done[0] += 1
        if sys.stderr.isatty():
            click.echo(f"\raudited {done[0]}/{len(targets)}", err=True, nl=done[0] == len(targets))

    audited = run_audit(resolver, targets, options, progress)
    if placement:
        from dns_audit.placement import placement_findings

        audited = placement_findings(audited, _placement_messages(app, database_url))
    reports = waive(audited, set(waivers))
    # Always a whole report, even when nothing could be audited: a CI step uploading it (SARIF) gets the
    # audit.no_data findings, not an empty file; the exit code still says the audit could not run.
    click.echo(render(reports, app.output_format(fmt), fail_on))
    if no_data:
        raise AuditError(f"no data for {', '.join(t.domain for t in targets)} in {describe(resolver)}: add "
                         "<domain>.zone there, or pass --nameserver to audit live")
    for code in dict.fromkeys(waivers):
        count = sum(f.code == code for r in reports for f in r.findings)
        click.echo(f"waived: {code} ({count} finding(s) not counted)", err=True)
    affected = [r for r in reports if any(at_or_above(f, fail_on) for f in r.findings)]
    failing = sum(1 for r in affected for f in r.findings if at_or_above(f, fail_on))
    if failing:
        app.fail(f"{failing} finding(s) at or above {fail_on} in {len(affected)} of {len(reports)} domain(s) "
                 "audited", 1)


def _placement_messages(app: App, database_url: str | None) -> list[Delivered]:
    """Each (mailbox, seed)'s latest placement message found in the seed, with its verdicts, from the ledger."""
    from dns_audit.placement import Delivered
    from sender.assembly import LedgerPlace

    with LedgerPlace(app.database_url(database_url).value, app.state_dir).open() as ledger:
        rows = ledger.fetch_all("placement_latest_found", {}, "placement results")
    return [Delivered(*row) for row in rows]


@group.command("check-message", epilog=EXIT_HELP)
@click.argument("message_file", type=click.Path(exists=True, dir_okay=False), metavar="FILE.eml")
@click.option("--nameserver", "nameservers", multiple=True, metavar="HOST[:PORT]",
              help="Nameserver for DKIM keys and DMARC (default: /etc/resolv.conf; with --zone-dir: names outside).")
@click.option("--zone-dir", metavar="DIR", help="Resolve DKIM keys and DMARC from zone files, offline.")
@click.option("--timeout", type=click.FloatRange(0.01, 60), default=2.0, show_default=True)
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default=None)
@click.option("--fail-on", type=click.Choice(["error", "warning"]), default="error", show_default=True)
@click.pass_obj
def check_message_command(app: App, message_file: str, nameservers: tuple[str, ...], zone_dir: str | None,
                          timeout: float, fmt: str | None, fail_on: str) -> None:
    """Check one message: RFC 8058 one-click unsubscribe, DKIM coverage of it, From alignment, a visible
    unsubscribe link in each body part."""
    from dns_audit.errors import AuditError, NoResolverAnswer
    from dns_audit.findings import at_or_above
    from dns_audit.message import NotAMessage, check_message
    from dns_audit.report.json import finding_dict

    resolver, live = _resolver(nameservers, zone_dir, timeout, 2)
    raw = Path(message_file).read_bytes()
    try:
        findings = asyncio.run(check_message(raw, resolver))
    except NotAMessage as exc:
        raise AuditError(f"{message_file} is not a message: {exc}; pass an .eml file") from None
    if live is not None and live.queries_sent and live.responses_received == 0:
        servers = ", ".join(f"{host}:{port}" for host, port in live.nameservers)
        raise NoResolverAnswer(f"no answer from nameserver {servers} to {live.queries_sent} queries (timeout "
                               f"{timeout:g}s): check --nameserver, or use --zone-dir offline")
    if app.output_format(fmt) == "json":
        emit_json({"schema": 2, "message": message_file, "findings": [finding_dict(f) for f in findings]})
    else:
        emit_table(f"sendhost dns check-message {_cell(message_file)}", ["severity", "code", "message", "fix"],
                   [tuple(_cell(v) for v in (f.severity, f.code, f.message, f.remediation)) for f in findings],
                   summary=f"{len(findings)} finding(s)" if findings else "no findings: one-click unsubscribe "
                   "signed and aligned")
    failing = sum(1 for f in findings if at_or_above(f, fail_on))
    if failing:
        app.fail(f"{failing} finding(s) at or above {fail_on} in {message_file}", 1)


def _cell(text: str) -> str:
    """A table cell from message or DNS text: control characters made visible, rich markup escaped (a `[/]` in
    a header must print as itself). Kept here until toolkit.output escapes every cell itself."""
    from rich.markup import escape

    from dns_audit.report.text import printable

    return escape(printable(text))
