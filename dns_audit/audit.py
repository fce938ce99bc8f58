"""Audit many domains concurrently: each domain runs every check under one deadline; lookups share one cache."""

from __future__ import annotations

import asyncio
import ipaddress
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import dns.exception
import dns.name

from dns_audit.alignment import audit_alignment
from dns_audit.dkim import audit_dkim
from dns_audit.dmarc import DmarcRecord, audit_dmarc
from dns_audit.dnsbl import DEFAULT_DOMAIN_ZONES, DEFAULT_IP_ZONES, audit_dnsbl
from dns_audit.errors import AuditError, BadDomain, NoResolverAnswer
from dns_audit.findings import Check, DomainReport, Finding, check_status, finding
from dns_audit.mta_sts import audit_mta_sts
from dns_audit.mx import audit_mx
from dns_audit.ptr import audit_ptr
from dns_audit.resolver import LiveResolver, Resolver
from dns_audit.spf import audit_spf, authorize_ips
from dns_audit.tls import TlsProbe, audit_mx_tls
from dns_audit.tlsrpt import audit_tlsrpt

PROFILES = ("gmail-bulk", "baseline")
# Google's bulk-sender rules add DMARC and From alignment to the all-senders floor.
BULK_ONLY_CHECKS = ("dmarc", "alignment")
CHECK_ORDER = ("spf", "dkim", "dmarc", "alignment", "ptr", "mx", "tls", "mta_sts", "tlsrpt", "dnsbl")


def normalize_domain(text: str) -> str:
    """A domain as its ASCII (IDNA) form; BadDomain naming the input otherwise."""
    candidate = text.strip().rstrip(".")
    try:
        name = dns.name.from_unicode(candidate) if not candidate.isascii() else dns.name.from_text(candidate)
        ascii_form = name.to_text(omit_final_dot=True).lower()
    except (dns.exception.DNSException, UnicodeError, ValueError) as exc:
        raise BadDomain(f"domain {text!r} is not a valid domain name ({exc})") from None
    labels = ascii_form.split(".")
    if len(labels) < 2 or not all(
        label and len(label) <= 63 and label[0] != "-" and label[-1] != "-"
        and all(c.isalnum() or c == "-" for c in label) for label in labels
    ):
        raise BadDomain(f"domain {text!r} is not a valid host name: use letters, digits and hyphens, e.g. example.com")
    return ascii_form


def normalize_ip(text: str) -> str:
    try:
        return str(ipaddress.ip_address(text.strip()))
    except ValueError:
        raise AuditError(f"--ip {text!r} is not an IP address") from None


@dataclass(frozen=True)
class DomainTarget:
    """One sending domain and what is known about how it sends."""

    domain: str
    selectors: tuple[str, ...] = ()
    ips: tuple[str, ...] = ()
    envelope_domain: str | None = None


@dataclass(frozen=True)
class AuditOptions:
    profile: str = "gmail-bulk"
    ip_zones: tuple[str, ...] = DEFAULT_IP_ZONES
    domain_zones: tuple[str, ...] = DEFAULT_DOMAIN_ZONES
    tls: TlsProbe | None = field(default_factory=TlsProbe)  # None: no network probes (zone-file audits)
    concurrency: int = 20
    deadline: float = 60.0  # seconds for one whole domain

    def runs(self, check: str) -> bool:
        if self.profile == "baseline" and check in BULK_ONLY_CHECKS:
            return False
        return not (check == "tls" and self.tls is None)


class _DomainRun:
    """The checks of one domain, recording which ran and what they found."""

    def __init__(self, resolver: Resolver, target: DomainTarget, options: AuditOptions) -> None:
        self.resolver = resolver
        self.target = target
        self.options = options
        self.results: dict[str, list[Finding]] = {}

    async def run(self) -> None:
        """Independent checks run concurrently: a domain costs its longest chain of lookups, not their sum."""
        t, r = self.target, self.resolver
        envelope = t.envelope_domain or t.domain
        await asyncio.gather(
            self._check("spf", self._spf(envelope)),
            self._policy(envelope),
            self._check("ptr", self._each_ip(audit_ptr)),
            self._mx_and_tls(),
            self._check("mta_sts", audit_mta_sts(r, t.domain)),
            self._check("tlsrpt", audit_tlsrpt(r, t.domain)),
            self._check("dnsbl", audit_dnsbl(r, t.domain, list(t.ips), list(self.options.ip_zones),
                                             list(self.options.domain_zones))),
        )

    async def _policy(self, envelope: str) -> None:
        """DKIM and DMARC together, then alignment (which needs to know whether a DKIM key is usable)."""
        t, r = self.target, self.resolver

        async def dkim() -> list[Finding]:
            # without a selector there is nothing to look up: the check is skipped, not passed
            return await self._check("dkim", audit_dkim(r, t.domain, list(t.selectors))) if t.selectors else []

        async def dmarc() -> tuple[list[Finding], DmarcRecord | None]:
            if not self.options.runs("dmarc"):
                return [], None
            found, record = await audit_dmarc(r, t.domain)
            self.results["dmarc"] = found
            return found, record

        dkim_findings, (_, dmarc_record) = await asyncio.gather(dkim(), dmarc())
        if self.options.runs("alignment"):
            usable = bool(t.selectors) and not any(f.severity == "error" for f in dkim_findings)
            self.results["alignment"] = audit_alignment(t.domain, envelope, t.domain if usable else None, dmarc_record)

    async def _mx_and_tls(self) -> None:
        mx_findings, hosts = await audit_mx(self.resolver, self.target.domain)
        self.results["mx"] = mx_findings
        probe = self.options.tls
        if probe is not None:
            probes = [audit_mx_tls(host.name, address, probe) for host in hosts for address in host.addresses]
            self.results["tls"] = [f for found in await asyncio.gather(*probes) for f in found]

    async def _spf(self, envelope: str) -> list[Finding]:
        found = await audit_spf(self.resolver, self.target.domain)
        if envelope != self.target.domain:
            found.extend(await audit_spf(self.resolver, envelope))
        found.extend(await authorize_ips(self.resolver, envelope, list(self.target.ips)))
        return _unique(found)

    async def _each_ip(self, check: Callable[[Resolver, str], Awaitable[list[Finding]]]) -> list[Finding]:
        found: list[Finding] = []
        for ip in self.target.ips:
            found.extend(await check(self.resolver, ip))
        return found

    async def _check(self, name: str, work: Awaitable[list[Finding]]) -> list[Finding]:
        if not self.options.runs(name):
            if asyncio.iscoroutine(work):
                work.close()
            return []
        found = await work
        self.results[name] = found
        return found

    def report(self, extra: list[Finding]) -> DomainReport:
        checks = []
        findings: list[Finding] = []
        for name in CHECK_ORDER:
            if name in self.results:
                checks.append(Check(name, check_status(self.results[name])))
                findings.extend(self.results[name])
            else:
                checks.append(Check(name, "skip"))
        if extra:
            checks.append(Check("deadline", check_status(extra)))
        return DomainReport(self.target.domain, tuple(findings + extra), tuple(checks))


def _unique(found: list[Finding]) -> list[Finding]:
    seen: set[tuple[str, str]] = set()
    out = []
    for item in found:
        if (item.code, item.message) not in seen:
            seen.add((item.code, item.message))
            out.append(item)
    return out


async def audit_domain(resolver: Resolver, target: DomainTarget, options: AuditOptions) -> DomainReport:
    """Every check for one domain, cut off at `options.deadline` (what finished is still reported)."""
    run = _DomainRun(resolver, target, options)
    try:
        await asyncio.wait_for(run.run(), options.deadline)
    except TimeoutError:
        late = finding("audit.deadline", f"audit of {target.domain} did not finish within {options.deadline:g}s",
                       "finished checks: " + (", ".join(run.results) or "none"))
        return run.report([late])
    return run.report([])


async def audit_domains(resolver: Resolver, targets: list[DomainTarget], options: AuditOptions,
                        on_done: Callable[[DomainReport], None] | None = None) -> list[DomainReport]:
    """Audit `targets` with at most `options.concurrency` domains in flight; reports keep the input order."""
    limit = asyncio.Semaphore(max(1, options.concurrency))

    async def one(target: DomainTarget) -> DomainReport:
        async with limit:
            report = await audit_domain(resolver, target, options)
        if on_done is not None:
            on_done(report)
        return report

    return list(await asyncio.gather(*(one(t) for t in targets)))


def _live(resolver: Resolver) -> LiveResolver | None:
    if isinstance(resolver, LiveResolver):
        return resolver
    fallback = getattr(resolver, "fallback", None)
    return fallback if isinstance(fallback, LiveResolver) else None


async def _audit_checked(resolver: Resolver, targets: list[DomainTarget], options: AuditOptions,
                         on_done: Callable[[DomainReport], None] | None) -> list[DomainReport]:
    live = _live(resolver)
    if live is not None and targets:
        # The root's NS (any server answers it, if only with REFUSED) and the first domains' TXT (needed for SPF
        # anyway, and cached): if not one gets any answer, the nameserver is unreachable and the audit cannot
        # run. Say so now instead of after every domain's deadline.
        probes = [live.query(".", "NS"), *(resolver.query(t.domain, "TXT") for t in targets[: options.concurrency])]
        await asyncio.gather(*probes)
        if live.responses_received == 0:
            servers = ", ".join(f"{host}:{port}" for host, port in live.nameservers)
            raise NoResolverAnswer(f"no answer from nameserver {servers} to {live.queries_sent} queries "
                                   f"(timeout {live.timeout:g}s): check --nameserver and that it is reachable")
    return await audit_domains(resolver, targets, options, on_done)


def run_audit(resolver: Resolver, targets: list[DomainTarget], options: AuditOptions,
              on_done: Callable[[DomainReport], None] | None = None) -> list[DomainReport]:
    """Blocking entry point: audit every target; NoResolverAnswer (exit 2) when no query is ever answered."""
    return asyncio.run(_audit_checked(resolver, targets, options, on_done))
