"""SPF checks: every branch of the include/redirect tree walked once, and RFC 7208 `check_host` for sending IPs."""

from __future__ import annotations

from dataclasses import dataclass, field

from dns_audit.findings import CheckSkipped, Finding, Location, clip, finding
from dns_audit.resolver import Answer, Resolver, normalize
from dns_audit.spf_eval import LOOKUP_LIMIT, VOID_LIMIT, check_host, check_host_for, evaluate
from dns_audit.spf_syntax import SpfRecord, SpfSyntaxError, Term, is_spf, parse_spf

__all__ = ["LOOKUP_LIMIT", "VOID_LIMIT", "audit_spf", "authorize_ips", "check_host", "check_host_for", "evaluate"]

MAX_RECORD_BYTES = 450  # keeps the TXT answer under 512 bytes with headers (RFC 7208 §3.4)


def _location(answer: Answer, text: str) -> Location | None:
    return next((r.location for r in answer.records if r.text == text), None)


@dataclass
class _Walk:
    """State of one static walk over a domain's SPF tree. The walk stops where receivers stop (RFC 7208 §4.6.4):
    after 10 DNS-querying terms or 2 void lookups, so a hostile include chain costs one finding, not the audit."""

    resolver: Resolver
    findings: list[Finding] = field(default_factory=list)
    lookups: int = 0
    voids: int = 0
    visited: set[str] = field(default_factory=set)
    targets: set[str] = field(default_factory=set)  # include:/redirect= targets named anywhere in the tree

    @property
    def over_limit(self) -> bool:
        return self.lookups > LOOKUP_LIMIT or self.voids > VOID_LIMIT

    def add(self, code: str, message: str, evidence: str = "", location: Location | None = None,
            subject: str = "") -> None:
        self.findings.append(finding(code, message, clip(evidence), location, subject))

    async def fetch(self, domain: str, via: str | None) -> tuple[SpfRecord | None, Answer]:
        """The SPF record at `domain`, reporting what is wrong with it; `via` names the referring term."""
        answer = await self.resolver.query(domain, "TXT")
        where = f"{domain} (via {via})" if via else domain
        if answer.failed:
            self.add("spf.lookup_failed", f"TXT lookup for {where} failed: {answer.error or answer.status}",
                     subject=domain)
            return None, answer
        if answer.unknown:
            if via is None:
                raise CheckSkipped(f"no SPF data for {domain}: {answer.error or 'not looked up'}")
            self.add("spf.not_followed", f"{via} leads outside the zone files: not followed, its lookups not "
                     "counted", f"TXT {domain}: {answer.error or 'unknown'}", subject=domain)
            return None, answer
        records = [t for t in answer.texts() if is_spf(t)]
        if not records:
            if via:
                if answer.status == "nxdomain":
                    self.voids += 1
                self.add("spf.include_void", f"{via} points at {domain}, which has no SPF record",
                         f"{domain}: {answer.status}", subject=domain)
            else:
                self.add("spf.missing", f"{domain} publishes no SPF record", f"TXT {domain}: {answer.status}")
            return None, answer
        if len(records) > 1:
            self.add("spf.multiple", f"{where} has {len(records)} SPF records; receivers return permerror",
                     " | ".join(records), _location(answer, records[1]), subject=domain)
            return None, answer
        text = records[0]
        location = _location(answer, text)
        if len(text.encode("utf-8", errors="replace")) > MAX_RECORD_BYTES:
            self.add("spf.too_long", f"SPF record of {where} is {len(text)} characters", text, location, domain)
        try:
            return parse_spf(text), answer
        except SpfSyntaxError as exc:
            self.add("spf.syntax", f"SPF record of {where}: {exc}", text, location, domain)
            return None, answer

    async def walk(self, domain: str, via: str | None = None) -> str | None:
        """Walk one record and everything it includes; return its effective `all` qualifier (None if none)."""
        if domain.lower() in self.visited:
            return "loop"
        self.visited.add(domain.lower())
        record, answer = await self.fetch(domain, via)
        if record is None:
            return "error"
        location = _location(answer, record.text)
        for term in record.terms:
            if term.queries_dns:
                self.lookups += 1
            if self.over_limit:
                break  # a receiver has already returned permerror: nothing further counts
            await self._follow(term, domain, location)
        all_term = record.all_term
        if all_term is not None:
            return all_term.qualifier
        redirect = record.modifier("redirect")
        if redirect and "%" not in redirect:
            self.targets.add(normalize(redirect))
            if self.over_limit:
                return "error"
            return await self.walk(redirect, via=f"redirect={redirect} in {domain}")
        return None

    async def _follow(self, term: Term, domain: str, location: Location | None) -> None:
        if term.name == "ptr":
            self.add("spf.ptr_mechanism", f"SPF of {domain} uses `ptr`, which is slow and deprecated",
                     f"{term.qualifier}ptr", location, domain)
        target = term.value or domain
        if "%" in target or term.modifier:
            return  # macros depend on the connecting IP: nothing to follow statically
        if term.name == "include":
            self.targets.add(normalize(target))
            await self.walk(target, via=f"include:{target} in {domain}")
        elif term.name in ("a", "mx", "exists"):
            answer = await self.resolver.query(target, "MX" if term.name == "mx" else "A")
            if answer.absent and term.name == "a":
                answer = await self.resolver.query(target, "AAAA")  # an IPv6-only name is not void
            if answer.failed:
                self.add("spf.lookup_failed", f"{term.name}:{target} in {domain}: lookup failed: {answer.error}",
                         subject=target)
            elif answer.absent:
                self.voids += 1


async def audit_spf(resolver: Resolver, domain: str, expected_includes: tuple[str, ...] = ()) -> list[Finding]:
    """Findings for the SPF tree of `domain` (syntax, limits, includes, `all`); each of `expected_includes` (a
    provider's include the inventory expects) must be named somewhere in the tree. CheckSkipped without data."""
    walk = _Walk(resolver)
    effective_all = await walk.walk(domain)
    top = await resolver.query(domain, "TXT")
    spf_texts = [t for t in top.texts() if is_spf(t)]
    location = _location(top, spf_texts[0]) if spf_texts else None
    if effective_all in ("+", "?") or effective_all is None:
        shown = "no `all` and no `redirect`" if effective_all is None else f"`{effective_all}all`"
        walk.add("spf.permissive_all", f"SPF of {domain} ends with {shown}: anyone may send as it",
                 spf_texts[0] if spf_texts else "", location)
    if walk.lookups > LOOKUP_LIMIT:
        walk.add("spf.lookup_limit", f"SPF of {domain} needs more than {LOOKUP_LIMIT} DNS lookups: receivers "
                 "return permerror", f"the walk stopped at lookup {walk.lookups} (include/a/mx/ptr/exists/redirect "
                 "terms across the tree)", location)
    if walk.voids > VOID_LIMIT:
        walk.add("spf.void_limit", f"SPF of {domain} has more than {VOID_LIMIT} void lookups: receivers return "
                 "permerror", "names that do not exist or have no records", location)
    if spf_texts:
        for expected in expected_includes:
            if normalize(expected) not in walk.targets:
                walk.add("spf.include_missing", f"SPF of {domain} does not include {expected}, which the "
                         "inventory expects (spf_includes)", spf_texts[0], location, normalize(expected))
    return walk.findings


async def authorize_ips(resolver: Resolver, domain: str, ips: list[str]) -> list[Finding]:
    """`spf.ip_not_authorized` for each sending IP that does not evaluate to pass for `domain`."""
    findings = []
    for ip in ips:
        result = await evaluate(resolver, ip, domain)
        if result == "unknown":
            findings.append(finding("spf.not_followed", f"SPF of {domain} for {ip} leads outside the zone files: "
                                    "not evaluated", f"check_host({ip}, {domain}) left the zone files", subject=ip))
        elif result == "temperror":
            findings.append(finding("spf.lookup_failed", f"evaluating SPF of {domain} for {ip}: a lookup failed",
                                    f"check_host({ip}, {domain}) = temperror", subject=ip))
        elif result != "pass":
            findings.append(finding("spf.ip_not_authorized", f"{ip} is not authorized by the SPF of {domain}",
                                    f"check_host({ip}, {domain}) = {result}", subject=ip))
    return findings

