"""SMTP TLS Reporting (RFC 8460 §3): the `_smtp._tls` TXT record."""

from __future__ import annotations

from dns_audit.findings import CheckSkipped, Finding, clip, finding
from dns_audit.resolver import Resolver
from dns_audit.tags import TagSyntaxError, parse_tags


def tlsrpt_problem(text: str) -> str | None:
    """What is wrong with a TLS-RPT TXT record, or None. No I/O."""
    try:
        tags = parse_tags(text)
    except TagSyntaxError as exc:
        return str(exc)
    if next(iter(tags), None) != "v" or tags["v"] != "TLSRPTv1":
        return "must start with v=TLSRPTv1"
    uris = [u.strip() for u in tags.get("rua", "").split(",") if u.strip()]
    if not uris:
        return "no rua= destination"
    bad = [u for u in uris if not u.lower().startswith(("mailto:", "https:"))]
    if bad:
        return f"rua={bad[0]!r}: expected mailto: or https:"
    return None


async def audit_tlsrpt(resolver: Resolver, domain: str) -> list[Finding]:
    name = f"_smtp._tls.{domain}"
    answer = await resolver.query(name, "TXT")
    if answer.failed:
        return [finding("tlsrpt.lookup_failed", f"TXT lookup for {name} failed: {answer.error or answer.status}")]
    if answer.unknown:
        raise CheckSkipped(f"{name} is not in the zone files")
    records = [r for r in answer.records if r.text.lower().startswith("v=tlsrpt")]
    if not records:
        return [finding("tlsrpt.missing", f"{domain} publishes no TLS-RPT record", f"TXT {name}: {answer.status}")]
    if len(records) > 1:
        return [finding("tlsrpt.invalid", f"{name} has {len(records)} records; senders ignore them all",
                        clip(" | ".join(r.text for r in records)), records[1].location)]
    problem = tlsrpt_problem(records[0].text)
    if problem:
        return [finding("tlsrpt.invalid", f"TLS-RPT record {name}: {problem}", clip(records[0].text),
                        records[0].location)]
    return []
