"""A campaign's tracking domain (docs/tracking.md): it resolves, its HTTPS certificate is valid for the name, and it
is on none of the URI blocklists configured (the domain zones of the DNSBL check: Spamhaus DBL, SURBL, URIBL).
A blocklisted link in a message is enough for a filter to bin it, whoever sent it."""

from __future__ import annotations

import asyncio
import contextlib
import ssl

from dns_audit.dnsbl import _lookup
from dns_audit.findings import CheckSkipped, Finding, finding
from dns_audit.resolver import Resolver
from dns_audit.tls import TlsProbe

HTTPS_PORT = 443
MAX_ADDRESSES = 4  # per tracking domain: a hostile answer cannot make the audit dial forever


async def _addresses(resolver: Resolver, domain: str) -> tuple[list[str], list[Finding]]:
    answers = [await resolver.query(domain, rdtype) for rdtype in ("A", "AAAA")]
    if all(answer.unknown for answer in answers):
        raise CheckSkipped(f"{domain} is outside the zone files: not asked")
    failed = [a for a in answers if a.failed]
    addresses = [text for answer in answers if not answer.failed for text in answer.texts()]
    if failed and not addresses:
        return [], [finding("tracking.lookup_failed", f"the addresses of tracking domain {domain} could not be "
                            f"looked up: {failed[0].error or failed[0].status}", f"A/AAAA {domain}", subject=domain)]
    if not addresses:
        return [], [finding("tracking.unresolved", f"tracking domain {domain} has no A or AAAA record: every "
                            "tracked link of its campaigns leads nowhere", f"A/AAAA {domain}: none", subject=domain)]
    return addresses, []


async def _https(domain: str, address: str, probe: TlsProbe, port: int) -> list[Finding]:
    """A TLS handshake with `address` for `domain`, its certificate verified for the name."""
    context = ssl.create_default_context(cafile=probe.ca_file)
    try:
        _reader, writer = await asyncio.wait_for(
            asyncio.open_connection(address, port, ssl=context, server_hostname=domain), probe.timeout)
    except ssl.SSLCertVerificationError as exc:
        return [finding("tracking.tls_invalid", f"the HTTPS certificate of tracking domain {domain} at {address} "
                        f"does not verify: {exc.verify_message or exc.reason}", f"{address}:{port}",
                        subject=f"{domain}@{address}")]
    except (OSError, ssl.SSLError, TimeoutError) as exc:
        return [finding("tracking.https_unreachable", f"tracking domain {domain} at {address}:{port} does not "
                        f"answer HTTPS: {type(exc).__name__}", str(exc)[:200] or type(exc).__name__,
                        subject=f"{domain}@{address}")]
    writer.close()
    with contextlib.suppress(OSError, ssl.SSLError, TimeoutError):
        await asyncio.wait_for(writer.wait_closed(), 1.0)
    return []


async def audit_tracking(resolver: Resolver, domains: list[str], domain_zones: list[str], probe: TlsProbe | None,
                         port: int = HTTPS_PORT) -> list[Finding]:
    """Each tracking domain: resolves, HTTPS verifies for the name (live audits: `probe`), on no URI blocklist of
    `domain_zones`. CheckSkipped when there is nothing to look at."""
    if not domains:
        raise CheckSkipped("no campaign names a tracking domain (--campaign FILE)")
    found: list[Finding] = []
    for domain in dict.fromkeys(domains):
        addresses, problems = await _addresses(resolver, domain)
        found += problems
        if probe is not None:
            for address in addresses[:MAX_ADDRESSES]:
                found += await _https(domain, address, probe, port)
        for zone in domain_zones:
            with contextlib.suppress(CheckSkipped):
                found += await _lookup(resolver, f"{domain}.{zone}", zone, domain, "tracking.listed")
    return found
