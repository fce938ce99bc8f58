"""Reverse DNS of sending IPs: PTR present, forward-confirmed (FCrDNS), not a provider's generic name."""

from __future__ import annotations

import ipaddress
import re

from dns_audit.findings import CheckSkipped, Finding, finding
from dns_audit.resolver import Resolver

# Names providers hand out by default; receivers treat them as "no identity".
GENERIC_PATTERNS = (
    re.compile(r"(^|\.)ec2-\d+-\d+-\d+-\d+\.", re.I),
    re.compile(r"\.compute(-1)?\.amazonaws\.com$", re.I),
    re.compile(r"\.bc\.googleusercontent\.com$", re.I),
    re.compile(r"\.(vultrusercontent|linodeusercontent|your-server|contaboserver|hetzner)\.", re.I),
    re.compile(r"^(ip|host|static|dynamic|dhcp|pool|client)[-.]?\d+[-.]\d+[-.]\d+[-.]\d+", re.I),
)


def is_generic(name: str, ip: str) -> bool:
    """True for a PTR name that looks auto-generated (provider pattern, or the IP's digits spelled out)."""
    if any(p.search(name) for p in GENERIC_PATTERNS):
        return True
    octets = ip.split(".") if "." in ip else []
    return len(octets) == 4 and ("-".join(octets) in name or "-".join(reversed(octets)) in name)


async def audit_ptr(resolver: Resolver, ip: str) -> list[Finding]:
    """Findings for one sending IP's reverse DNS; CheckSkipped when the answer is outside the zone files."""
    reverse = ipaddress.ip_address(ip).reverse_pointer
    answer = await resolver.query(reverse, "PTR")
    if answer.failed:
        return [finding("ptr.lookup_failed", f"PTR lookup for {ip} failed: {answer.error or answer.status}",
                        subject=ip)]
    if answer.unknown:
        raise CheckSkipped(f"reverse DNS of {ip} is not in the zone files")
    if not answer.records:
        return [finding("ptr.missing", f"sending IP {ip} has no reverse DNS (PTR)", f"PTR {reverse}: {answer.status}",
                        subject=ip)]
    found: list[Finding] = []
    rdtype = "A" if ipaddress.ip_address(ip).version == 4 else "AAAA"
    confirmed = unknown = False
    for record in answer.records:
        forward = await resolver.query(record.text, rdtype)
        if forward.unknown:
            unknown = True  # the name lives outside the zone files: cannot be confirmed offline
            continue
        if forward.failed:
            found.append(finding("ptr.lookup_failed", f"{rdtype} lookup for {record.text} failed: {forward.error}",
                                 subject=ip))
            continue
        if ip in forward.texts():
            confirmed = True
        if is_generic(record.text, ip):
            found.append(finding("ptr.generic", f"PTR of {ip} is a generic provider name: {record.text}",
                                 f"PTR {reverse} = {record.text}", record.location, ip))
    names = ", ".join(answer.texts())
    if not confirmed and unknown and not found:
        raise CheckSkipped(f"PTR of {ip} ({names}) is outside the zone files: not forward-confirmed")
    if not confirmed and not unknown and not any(f.code == "ptr.lookup_failed" for f in found):
        found.append(finding("ptr.mismatch", f"PTR of {ip} ({names}) does not resolve back to {ip}",
                             f"PTR {reverse} = {names}", answer.records[0].location, ip))
    return found


async def audit_ptrs(resolver: Resolver, ips: list[str], submission: bool) -> list[Finding]:
    """Every sending IP's reverse DNS. Submission addresses (the pool's, seen only in Received headers) are
    reported as information; direct-to-MX addresses must pass. CheckSkipped when no address could be checked."""
    if not ips:
        raise CheckSkipped("no sending IPs to check (name them with --ip, or audit the inventory's pool)")
    found: list[Finding] = []
    skipped: list[str] = []
    for ip in ips:
        try:
            results = await audit_ptr(resolver, ip)
        except CheckSkipped as exc:
            skipped.append(str(exc))
            continue
        if submission:
            names = ", ".join(f.message for f in results) or "PTR present and forward-confirmed"
            results = [finding("ptr.submission", f"submission IP {ip}: {names}", "; ".join(
                f.evidence for f in results if f.evidence), subject=ip)]
        found.extend(results)
    if len(skipped) == len(ips):
        raise CheckSkipped("; ".join(skipped))
    return found
