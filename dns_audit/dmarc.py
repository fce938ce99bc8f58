"""DMARC records (RFC 7489 §6): parse without I/O, find the policy (with organizational-domain fallback), audit."""

from __future__ import annotations

from dataclasses import dataclass

from dns_audit.findings import CheckSkipped, Finding, Location, clip, finding
from dns_audit.orgdomain import organizational_domain
from dns_audit.resolver import Answer, Resolver
from dns_audit.tags import TagSyntaxError, parse_tags

POLICIES = ("none", "quarantine", "reject")


class DmarcSyntaxError(ValueError):
    """The record breaks RFC 7489 §6.4."""


@dataclass(frozen=True)
class DmarcRecord:
    text: str
    policy: str
    subdomain_policy: str | None
    rua: tuple[str, ...]
    ruf: tuple[str, ...]
    adkim: str
    aspf: str
    pct: int


def is_dmarc(text: str) -> bool:
    return text.replace(" ", "")[:8].upper() == "V=DMARC1"


def _uris(value: str, tag: str) -> tuple[str, ...]:
    uris = tuple(u.strip() for u in value.split(",") if u.strip())
    for uri in uris:
        if not uri.lower().startswith(("mailto:", "https:", "http:")):
            raise DmarcSyntaxError(f"{tag}={uri!r}: expected mailto: or https: URIs")
        if uri.lower().startswith("mailto:") and "@" not in uri:
            raise DmarcSyntaxError(f"{tag}={uri!r}: mailto: URI without an address")
    return uris


def parse_dmarc(text: str) -> DmarcRecord:
    """Parse a DMARC record; DmarcSyntaxError names the bad tag."""
    try:
        tags = parse_tags(text)
    except TagSyntaxError as exc:
        raise DmarcSyntaxError(str(exc)) from None
    if next(iter(tags), None) != "v" or tags["v"] != "DMARC1":
        raise DmarcSyntaxError("must start with v=DMARC1")
    policy = tags.get("p", "").lower()
    if policy not in POLICIES:
        raise DmarcSyntaxError(f"p={tags.get('p', '')!r}: expected none, quarantine or reject")
    sp = tags.get("sp")
    if sp is not None and sp.lower() not in POLICIES:
        raise DmarcSyntaxError(f"sp={sp!r}: expected none, quarantine or reject")
    for tag in ("adkim", "aspf"):
        if tags.get(tag, "r").lower() not in ("r", "s"):
            raise DmarcSyntaxError(f"{tag}={tags[tag]!r}: expected r or s")
    pct_text = tags.get("pct", "100")
    if not pct_text.isdigit() or int(pct_text) > 100:
        raise DmarcSyntaxError(f"pct={pct_text!r}: expected 0..100")
    return DmarcRecord(text, policy, sp.lower() if sp else None, _uris(tags.get("rua", ""), "rua"),
                       _uris(tags.get("ruf", ""), "ruf"), tags.get("adkim", "r").lower(),
                       tags.get("aspf", "r").lower(), int(pct_text))


@dataclass(frozen=True)
class DmarcLookup:
    """The policy that applies to a domain, where it was found, and what went wrong finding it."""

    record: DmarcRecord | None
    source: str  # the _dmarc name the record came from
    findings: tuple[Finding, ...]
    location: Location | None = None


def _location(answer: Answer, text: str) -> Location | None:
    return next((r.location for r in answer.records if r.text == text), None)


async def find_policy(resolver: Resolver, domain: str) -> DmarcLookup:
    """Look up `_dmarc.<domain>`, falling back to the organizational domain (RFC 7489 §6.6.3)."""
    names = [f"_dmarc.{domain}"]
    org = organizational_domain(domain)
    if org != domain.lower().rstrip("."):
        names.append(f"_dmarc.{org}")
    for name in names:
        answer = await resolver.query(name, "TXT")
        if answer.failed:
            return DmarcLookup(None, name, (finding(
                "dmarc.lookup_failed", f"TXT lookup for {name} failed: {answer.error or answer.status}"),))
        if answer.unknown:
            return DmarcLookup(None, name, ())
        records = [t for t in answer.texts() if is_dmarc(t)]
        if not records:
            continue
        if len(records) > 1:
            return DmarcLookup(None, name, (finding(
                "dmarc.multiple", f"{name} has {len(records)} DMARC records; receivers ignore all of them",
                clip(" | ".join(records)), _location(answer, records[1])),))
        try:
            return DmarcLookup(parse_dmarc(records[0]), name, (), _location(answer, records[0]))
        except DmarcSyntaxError as exc:
            return DmarcLookup(None, name, (finding("dmarc.syntax", f"DMARC record {name}: {exc}", clip(records[0]),
                                                    _location(answer, records[0])),))
    return DmarcLookup(None, names[-1], (finding(
        "dmarc.missing", f"no DMARC record for {domain}" + (f" or its organizational domain {org}"
                                                            if len(names) > 1 else ""),
        "TXT " + ", ".join(names) + ": no v=DMARC1 record"),))


async def audit_dmarc(resolver: Resolver, domain: str,
                      floor: str | None = None) -> tuple[list[Finding], DmarcRecord | None]:
    """Findings for the DMARC policy of `domain` (no weaker than `floor`, when given), and the record (for
    alignment checks). CheckSkipped when the record is outside the zone files."""
    lookup = await find_policy(resolver, domain)
    found = list(lookup.findings)
    record = lookup.record
    if record is None:
        if not found:
            raise CheckSkipped(f"{lookup.source} is not in the zone files")
        return found, None
    applied = record.policy
    if lookup.source != f"_dmarc.{domain.lower().rstrip('.')}" and record.subdomain_policy:
        applied = record.subdomain_policy  # the organizational domain's sp= governs its subdomains
    if floor is not None and POLICIES.index(applied) < POLICIES.index(floor):
        found.append(finding("dmarc.below_floor", f"DMARC policy of {domain} is p={applied}, weaker than the "
                             f"inventory's dmarc_floor {floor}", clip(record.text), lookup.location))
    if record.policy == "none":
        found.append(finding("dmarc.policy_none", f"DMARC policy of {domain} is p=none: failing mail is delivered",
                             clip(record.text), lookup.location))
    if not record.rua:
        found.append(finding("dmarc.rua_missing", f"DMARC record {lookup.source} has no rua=", clip(record.text),
                             lookup.location))
    found.extend(await _external_reports(resolver, lookup.source.removeprefix("_dmarc."), record))
    return found, record


async def _external_reports(resolver: Resolver, policy_domain: str, record: DmarcRecord) -> list[Finding]:
    """RFC 7489 §7.1: a report address outside the policy domain's organization must opt in."""
    found = []
    org = organizational_domain(policy_domain)
    for uri in record.rua:
        if not uri.lower().startswith("mailto:"):
            continue
        destination = uri.split("@", 1)[1].split("!", 1)[0].rstrip(".").lower()
        if organizational_domain(destination) == org:
            continue
        name = f"{policy_domain}._report._dmarc.{destination}"
        answer = await resolver.query(name, "TXT")
        if answer.failed:
            found.append(finding("dmarc.lookup_failed", f"TXT lookup for {name} failed: {answer.error}"))
        elif not answer.unknown and not any(is_dmarc(t) for t in answer.texts()):
            found.append(finding("dmarc.rua_unauthorized",
                                 f"{destination} has not agreed to receive reports for {policy_domain}",
                                 f"rua={uri}; TXT {name}: {answer.status}"))
    return found
