"""Audit many domains concurrently: each domain runs every check under one deadline; lookups share one cache."""

from __future__ import annotations

import asyncio
import ipaddress
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from enum import StrEnum

import dns.exception
import dns.name

from dns_audit.alignment import audit_alignment
from dns_audit.dkim import audit_dkim
from dns_audit.dmarc import DmarcRecord, audit_dmarc
from dns_audit.dnsbl import DEFAULT_DOMAIN_ZONES, DEFAULT_IP_ZONES, audit_dnsbl
from dns_audit.errors import AuditError, BadDomain, NoResolverAnswer
from dns_audit.findings import Check, CheckSkipped, DomainReport, Finding, Location, check_status, clip, finding
from dns_audit.mta_sts import audit_mta_sts
from dns_audit.mx import audit_mx
from dns_audit.ptr import audit_ptrs
from dns_audit.resolver import LiveResolver, Resolver, covers, describe
from dns_audit.spf import audit_spf, authorize_ips
from dns_audit.tls import MAX_PROBES, TlsProbe, audit_mx_tls
from dns_audit.tlsrpt import audit_tlsrpt
from dns_audit.tracking import HTTPS_PORT, audit_tracking

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


class SendingMode(StrEnum):
    """How a domain's mail leaves: through the mailbox provider (the sender agent's model) or from its own MTA."""

    SUBMISSION = "submission"
    DIRECT = "direct"


# Checks whose skip fails the gate (`<check>.skipped`, an error) unless waived: what the profile requires.
REQUIRED = {"gmail-bulk": ("spf", "dkim", "dmarc", "alignment"), "baseline": ("spf", "dkim")}


@dataclass(frozen=True)
class DomainTarget:
    """One sending domain and what is known about how it sends.

    `sending_mode` `submission` (the default): mail leaves through the mailbox provider's servers, so `ips` (the
    pool's addresses) are screened on blocklists and their PTR reported as information, but SPF is checked for
    the provider's include (`spf_includes`). `direct`: `ips` deliver to MX themselves and must pass SPF and PTR."""

    domain: str
    selectors: tuple[str, ...] = ()
    ips: tuple[str, ...] = ()
    envelope_domain: str | None = None
    sending_mode: str = SendingMode.SUBMISSION
    spf_includes: tuple[str, ...] = ()
    dmarc_floor: str | None = None
    declared_at: Location | None = None  # the inventory line declaring the domain (for report locations)
    tracking_domains: tuple[str, ...] = ()  # the tracking domains of its campaigns (docs/tracking.md)

    @property
    def direct(self) -> bool:
        return self.sending_mode == SendingMode.DIRECT


@dataclass(frozen=True)
class AuditOptions:
    profile: str = "gmail-bulk"
    ip_zones: tuple[str, ...] = DEFAULT_IP_ZONES
    domain_zones: tuple[str, ...] = DEFAULT_DOMAIN_ZONES
    tls: TlsProbe | None = field(default_factory=TlsProbe)  # None: no network probes (zone-file audits)
    concurrency: int = 20
    deadline: float = 60.0  # seconds for one whole domain
    https_port: int = HTTPS_PORT  # where a tracking domain's HTTPS is probed

    def runs(self, check: str) -> bool:
        return not (self.profile == "baseline" and check in BULK_ONLY_CHECKS)


class _DomainRun:
    """The checks of one domain, recording which ran and what they found, and why a check was skipped."""

    def __init__(self, resolver: Resolver, target: DomainTarget, options: AuditOptions) -> None:
        self.resolver = resolver
        self.target = target
        self.options = options
        self.results: dict[str, list[Finding]] = {}
        self.notes: dict[str, str] = {}

    async def run(self) -> None:
        """Independent checks run concurrently: a domain costs its longest chain of lookups, not their sum."""
        t, r = self.target, self.resolver
        envelope = t.envelope_domain or t.domain
        await asyncio.gather(
            self._check("spf", self._spf(envelope)),
            self._policy(envelope),
            self._check("ptr", audit_ptrs(r, list(t.ips), submission=not t.direct)),
            self._mx_and_tls(),
            self._check("mta_sts", audit_mta_sts(r, t.domain)),
            self._check("tlsrpt", audit_tlsrpt(r, t.domain)),
            self._check("dnsbl", audit_dnsbl(r, t.domain, list(t.ips), list(self.options.ip_zones),
                                             list(self.options.domain_zones))),
            *([self._check("tracking", audit_tracking(r, list(t.tracking_domains), list(self.options.domain_zones),
                                                      self.options.tls, self.options.https_port))]
              if t.tracking_domains else []),
        )

    async def _policy(self, envelope: str) -> None:
        """DKIM and DMARC together, then alignment (which needs to know whether a DKIM key is usable)."""
        t, r = self.target, self.resolver
        dmarc_record: list[DmarcRecord | None] = []

        async def dkim() -> list[Finding]:
            if t.selectors:
                return await audit_dkim(r, t.domain, list(t.selectors))
            if self.options.profile == "gmail-bulk":
                return [finding("dkim.no_selector", f"no DKIM selector configured for {t.domain}: its keys were "
                                "not checked", "dkim_selectors: [] (and no --selector)")]
            raise CheckSkipped("no DKIM selector configured (dkim_selectors in the inventory, or --selector)")

        async def dmarc() -> list[Finding]:
            found, record = await audit_dmarc(r, t.domain, t.dmarc_floor)
            dmarc_record.append(record)
            return found

        dkim_findings, _ = await asyncio.gather(self._check("dkim", dkim()), self._check("dmarc", dmarc()))
        if not self.options.runs("alignment"):
            self.notes["alignment"] = f"not part of the {self.options.profile} profile"
        elif "dmarc" in self.notes:
            self.notes["alignment"] = "needs the DMARC record, which was not looked at"
        else:
            usable = bool(t.selectors) and "dkim" not in self.notes and not any(
                f.severity == "error" for f in dkim_findings)
            record = dmarc_record[0] if dmarc_record else None
            self.results["alignment"] = audit_alignment(t.domain, envelope, t.domain if usable else None, record)

    async def _mx_and_tls(self) -> None:
        await self._check("mx", self._mx())
        if "mx" in self.notes and "tls" not in self.notes:
            self.notes["tls"] = f"no MX hosts to probe: {self.notes['mx']}"

    async def _mx(self) -> list[Finding]:
        mx_findings, hosts = await audit_mx(self.resolver, self.target.domain)
        probe = self.options.tls
        if probe is None:
            self.notes["tls"] = "offline audit: MX hosts are not probed"
            return mx_findings
        pairs = [(host.name, address) for host in hosts for address in host.addresses]
        if not pairs:
            self.notes["tls"] = "no MX host address to probe"
            return mx_findings
        await self._check("tls", self._tls(pairs, probe))
        return mx_findings

    async def _tls(self, pairs: list[tuple[str, str]], probe: TlsProbe) -> list[Finding]:
        probes = [audit_mx_tls(host, address, probe) for host, address in pairs[:MAX_PROBES]]
        found = [f for result in await asyncio.gather(*probes) for f in result]
        if len(pairs) > MAX_PROBES:
            left = ", ".join(f"{host} ({address})" for host, address in pairs[MAX_PROBES:])
            found.append(finding("tls.probe_limit", f"{len(pairs) - MAX_PROBES} MX address(es) of "
                                 f"{self.target.domain} not probed (limit {MAX_PROBES})", clip(left)))
        return found

    async def _spf(self, envelope: str) -> list[Finding]:
        t = self.target
        # the provider's includes are expected where receivers evaluate SPF: the envelope (Return-Path) domain
        expected = () if t.direct else t.spf_includes
        if envelope != t.domain:
            found = await audit_spf(self.resolver, t.domain)
            found.extend(await audit_spf(self.resolver, envelope, expected))
        else:
            found = await audit_spf(self.resolver, t.domain, expected)
        if t.direct:
            found.extend(await authorize_ips(self.resolver, envelope, list(t.ips)))
        return _unique(found)

    async def _check(self, name: str, work: Awaitable[list[Finding]]) -> list[Finding]:
        """Run one check. A skip records its reason; any other failure costs this check one finding, not the
        audit (a hostile answer that breaks a parser or recurses too deep must not stop the other checks)."""
        if not self.options.runs(name):
            if asyncio.iscoroutine(work):
                work.close()
            self.notes[name] = f"not part of the {self.options.profile} profile"
            return []
        try:
            found = await work
        except CheckSkipped as exc:
            self.notes[name] = str(exc)
            return []
        except Exception as exc:  # contained per check: a hostile answer costs one finding
            found = [finding(f"{name}.lookup_failed",
                             f"the {name} check of {self.target.domain} failed: {type(exc).__name__}",
                             clip(str(exc) or type(exc).__name__))]
        self.results[name] = found
        return found

    def report(self, extra: list[Finding]) -> DomainReport:
        checks = []
        findings: list[Finding] = []
        required = REQUIRED.get(self.options.profile, ()) + (("ptr",) if self.target.direct else ())
        # the tracking check only where a campaign names a tracking domain: other reports stay as they were
        for name in CHECK_ORDER + (("tracking",) if self.target.tracking_domains else ()):
            if name in self.results:
                checks.append(Check(name, check_status(self.results[name])))
                findings.extend(self.results[name])
                continue
            note = self.notes.get(name, "did not finish" if extra else "not run")
            checks.append(Check(name, "skip", note))
            if name in required and self.options.runs(name) and not extra:
                findings.append(finding(f"{name}.skipped", f"the {name} check of {self.target.domain} could not "
                                        f"run: {note}", note))
        if extra:
            checks.append(Check("deadline", check_status(extra)))
        located = tuple(f if f.location or self.target.declared_at is None else replace(
            f, location=self.target.declared_at) for f in findings + extra)
        return DomainReport(self.target.domain, located, tuple(checks))


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
    if not covers(resolver, target.domain):
        return _no_data(resolver, target)
    run = _DomainRun(resolver, target, options)
    try:
        await asyncio.wait_for(run.run(), options.deadline)
    except TimeoutError:
        late = finding("audit.deadline", f"audit of {target.domain} did not finish within {options.deadline:g}s",
                       "finished checks: " + (", ".join(run.results) or "none"))
        return run.report([late])
    return run.report([])


def _no_data(resolver: Resolver, target: DomainTarget) -> DomainReport:
    """A domain the resolver has no data for: every check skipped, saying so, and one error for the gate."""
    where = describe(resolver)
    note = f"no data for {target.domain} in {where}"
    # the reason is in the message; the evidence would only repeat it
    missing = finding("audit.no_data", f"nothing of {target.domain} was checked: {note}", "", target.declared_at)
    return DomainReport(target.domain, (missing,), tuple(Check(name, "skip", note) for name in CHECK_ORDER))


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
