"""MTA-STS (RFC 8461 §3.1): the `_mta-sts` TXT record. The HTTPS policy file is not fetched."""

from __future__ import annotations

import re

from dns_audit.findings import CheckSkipped, Finding, clip, finding
from dns_audit.resolver import Resolver
from dns_audit.tags import TagSyntaxError, parse_tags

_ID = re.compile(r"^[A-Za-z0-9]{1,32}$")


def mta_sts_problem(text: str) -> str | None:
    """What is wrong with an MTA-STS TXT record, or None. No I/O."""
    try:
        tags = parse_tags(text)
    except TagSyntaxError as exc:
        return str(exc)
    if next(iter(tags), None) != "v" or tags["v"] != "STSv1":
        return "must start with v=STSv1"
    if not _ID.match(tags.get("id", "")):
        return "id= must be 1-32 letters or digits"
    return None


async def audit_mta_sts(resolver: Resolver, domain: str) -> list[Finding]:
    name = f"_mta-sts.{domain}"
    answer = await resolver.query(name, "TXT")
    if answer.failed:
        return [finding("mta_sts.lookup_failed", f"TXT lookup for {name} failed: {answer.error or answer.status}")]
    if answer.unknown:
        raise CheckSkipped(f"{name} is not in the zone files")
    records = [r for r in answer.records if r.text.lower().startswith("v=sts")]
    if not records:
        return [finding("mta_sts.missing", f"{domain} publishes no MTA-STS record", f"TXT {name}: {answer.status}")]
    if len(records) > 1:
        return [finding("mta_sts.invalid", f"{name} has {len(records)} records; senders ignore them all",
                        clip(" | ".join(r.text for r in records)), records[1].location)]
    problem = mta_sts_problem(records[0].text)
    if problem:
        return [finding("mta_sts.invalid", f"MTA-STS record {name}: {problem}", clip(records[0].text),
                        records[0].location)]
    return []
