"""MX records: present, not a Null MX (RFC 7505), targets not CNAMEs; returns the hosts for the TLS check."""

from __future__ import annotations

from dataclasses import dataclass

from dns_audit.findings import CheckSkipped, Finding, finding
from dns_audit.resolver import Resolver


@dataclass(frozen=True)
class MxHost:
    name: str
    preference: int
    addresses: tuple[str, ...]


async def audit_mx(resolver: Resolver, domain: str) -> tuple[list[Finding], list[MxHost]]:
    """Findings for the MX set of `domain` and the MX hosts with their addresses."""
    answer = await resolver.query(domain, "MX")
    if answer.failed:
        return [finding("mx.lookup_failed", f"MX lookup for {domain} failed: {answer.error or answer.status}")], []
    if answer.unknown:
        raise CheckSkipped(f"MX of {domain} is not in the zone files")
    if not answer.records:
        return [finding("mx.missing", f"{domain} has no MX records", f"MX {domain}: {answer.status}")], []
    exchanges = []
    for record in answer.records:
        pref_text, _, host = record.text.partition(" ")
        exchanges.append((int(pref_text) if pref_text.isdigit() else 0, host.strip().rstrip("."), record))
    if any(host in ("", ".") for _, host, _ in exchanges):
        return [finding("mx.null", f"{domain} publishes a Null MX: it accepts no mail, including bounces",
                        f"MX {domain} = " + ", ".join(r.text for _, _, r in exchanges), exchanges[0][2].location)], []
    found: list[Finding] = []
    hosts: list[MxHost] = []
    for preference, host, record in sorted(exchanges, key=lambda e: e[0]):
        address = await resolver.query(host, "A")
        if address.cname:
            found.append(finding("mx.cname", f"MX target {host} of {domain} is a CNAME (to {address.cname})",
                                 f"MX {record.text}; {host} CNAME {address.cname}", record.location))
        if address.failed:
            found.append(finding("mx.lookup_failed", f"A lookup for MX host {host} failed: {address.error}"))
        hosts.append(MxHost(host, preference, tuple(address.texts())))
    return found, hosts
