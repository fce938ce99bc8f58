"""The simulation's DNS audit: the inventory's sending domains audited offline from zone files (dns_audit's
real checks over its `ZoneResolver`), exactly as `sendhost dns audit --zone-dir DIR --inventory PATH` audits
them; TLS probes and blocklists need the network and are skipped, saying so."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from dns_audit.audit import AuditOptions, DomainTarget, run_audit
from dns_audit.findings import DomainReport
from dns_audit.zonefile import ZoneResolver
from sendhost.model import Domain


def example_zone_dir() -> Path:
    """The zone files shipped with the package for the example inventory's domains."""
    return Path(str(resources.files("simulation") / "data" / "zones"))


def audit_zones(zone_dir: Path, domains: tuple[Domain, ...],
                sending_ips: tuple[str, ...] = ()) -> list[DomainReport]:
    """Audit every domain (or, with none configured, every zone in `zone_dir`) against the zone files."""
    resolver = ZoneResolver(zone_dir)
    if domains:
        targets = [DomainTarget(d.name.lower(), d.dkim_selectors, sending_ips, d.envelope_domain, d.sending_mode,
                                d.spf_includes, d.dmarc_floor) for d in domains]
    else:
        targets = [DomainTarget(origin.rstrip("."), (), sending_ips) for origin in resolver.origins
                   if not origin.endswith(".arpa")]
    options = AuditOptions(ip_zones=(), domain_zones=(), tls=None)
    return run_audit(resolver, targets, options)

