"""DNS blocklists (RFC 5782): sending IPs and the domain. 127.255.255.x answers and REFUSED are the list
refusing to answer (rate limit, public resolver), never a listing."""

from __future__ import annotations

import ipaddress

from dns_audit.findings import CheckSkipped, Finding, finding
from dns_audit.resolver import Resolver

DEFAULT_IP_ZONES = ("zen.spamhaus.org", "bl.spamcop.net", "b.barracudacentral.org")
DEFAULT_DOMAIN_ZONES = ("dbl.spamhaus.org",)


def reversed_ip(ip: str) -> str:
    address = ipaddress.ip_address(ip)
    return address.reverse_pointer.rsplit(".", 2)[0]  # drop in-addr.arpa / ip6.arpa


def _is_refusal(address: str) -> bool:
    return address.startswith("127.255.255.")


async def _lookup(resolver: Resolver, name: str, zone: str, subject: str, listed_code: str) -> list[Finding]:
    answer = await resolver.query(name, "A")
    if answer.unknown:
        raise CheckSkipped(f"{zone} is outside the zone files: not asked")
    if answer.status == "refused":
        return [finding("dnsbl.refused", f"{zone} refused the query for {subject}", f"A {name}: REFUSED",
                        subject=f"{subject}@{zone}")]
    if answer.failed:
        return [finding("dnsbl.lookup_failed", f"{zone} lookup for {subject} failed: {answer.error}",
                        subject=f"{subject}@{zone}")]
    codes = answer.texts()
    if not codes:
        return []
    if all(_is_refusal(code) for code in codes):
        return [finding("dnsbl.refused", f"{zone} answered {', '.join(codes)} for {subject}: an error, not a listing",
                        f"A {name} = {', '.join(codes)}", subject=f"{subject}@{zone}")]
    reason = await resolver.query(name, "TXT")
    why = "; ".join(reason.texts())[:200]
    return [finding(listed_code, f"{subject} is listed on {zone}",
                    f"A {name} = {', '.join(codes)}" + (f"; TXT {why}" if why else ""), subject=f"{subject}@{zone}")]


async def audit_dnsbl(resolver: Resolver, domain: str, ips: list[str], ip_zones: list[str],
                      domain_zones: list[str]) -> list[Finding]:
    """Listings of each sending IP on `ip_zones` and of `domain` on `domain_zones`; CheckSkipped when no list
    was asked anything (offline, or none configured): a list never asked is not a clean listing."""
    lookups = [(f"{reversed_ip(ip)}.{zone}", zone, ip, "dnsbl.ip_listed") for zone in ip_zones for ip in ips]
    lookups += [(f"{domain}.{zone}", zone, domain, "dnsbl.domain_listed") for zone in domain_zones]
    if not lookups:
        raise CheckSkipped("no blocklist to ask (offline audits ask none; name them with --dnsbl)")
    found: list[Finding] = []
    skipped: list[str] = []
    for name, zone, subject, code in lookups:
        try:
            found.extend(await _lookup(resolver, name, zone, subject, code))
        except CheckSkipped as exc:
            skipped.append(str(exc))
    if len(skipped) == len(lookups):
        raise CheckSkipped(sorted(set(skipped))[0] if len(set(skipped)) == 1 else "; ".join(sorted(set(skipped))))
    return found
