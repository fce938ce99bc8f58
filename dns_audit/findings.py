"""Findings: small frozen records with a stable dotted code, a severity, evidence, remediation and reference.

Severity, remediation and reference live in one catalog keyed by code, so a code always means the same thing.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal

Severity = Literal["error", "warning", "info"]
SEVERITY_RANK: dict[str, int] = {"info": 0, "warning": 1, "error": 2}


@dataclass(frozen=True)
class Location:
    """Where a record came from when auditing zone files."""

    file: str
    line: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass(frozen=True)
class Finding:
    code: str
    severity: Severity
    message: str
    evidence: str
    remediation: str
    reference: str
    location: Location | None = None
    subject: str = ""  # what the finding is about within its domain (an IP, a selector, a host): part of its identity
    waived: bool = False  # named by --waive: reported, but not counted against the gate

    @property
    def area(self) -> str:
        return self.code.split(".", 1)[0]


class CheckSkipped(Exception):
    """Raised by a check that could not look at anything; the message says why (shown as the check's note)."""


@dataclass(frozen=True)
class FindingRule:
    severity: Severity
    remediation: str
    reference: str


RFC7208 = "RFC 7208"
RFC6376 = "RFC 6376"
RFC7489 = "RFC 7489"
GMAIL = "Google email sender guidelines (support.google.com/a/answer/81126)"

CATALOG: dict[str, FindingRule] = {
    "spf.missing": FindingRule(
        "error",
        "Publish one TXT record starting `v=spf1` ending in `-all` or `~all`.",
        f"{RFC7208} §4.5; {GMAIL}"),
    "spf.multiple": FindingRule(
        "error", "Merge the SPF TXT records into exactly one `v=spf1` record.", f"{RFC7208} §3.2"),
    "spf.syntax": FindingRule(
        "error", "Fix the SPF record so every term is a valid mechanism or modifier.", f"{RFC7208} §12"),
    "spf.lookup_limit": FindingRule(
        "error",
        "Flatten includes or drop mechanisms: at most 10 DNS-querying terms in total.",
        f"{RFC7208} §4.6.4"),
    "spf.void_limit": FindingRule(
        "error",
        "Remove terms pointing at names that do not exist (at most 2 void lookups).",
        f"{RFC7208} §4.6.4"),
    "spf.include_void": FindingRule(
        "error",
        "Remove the include, or publish an SPF record at its target.",
        f"{RFC7208} §5.2"),
    "spf.include_missing": FindingRule(
        "error",
        "Add the provider's `include:` that the inventory expects (spf_includes) to the domain's SPF record.",
        f"{RFC7208} §5.2; {GMAIL}"),
    "spf.not_followed": FindingRule(
        "info",
        "Add the zone file of the included domain, or pass --nameserver so names outside the files are looked up.",
        f"{RFC7208} §4.6.4"),
    "spf.skipped": FindingRule(
        "error",
        "Give the audit the domain's SPF data (its zone file or a nameserver), or --waive spf.skipped.",
        f"{RFC7208} §2.3; {GMAIL}"),
    "spf.permissive_all": FindingRule("error", "End the record with `-all` or `~all`.", f"{RFC7208} §5.1; {GMAIL}"),
    "spf.ptr_mechanism": FindingRule("warning", "Replace `ptr` with `ip4`/`ip6`/`a` mechanisms.", f"{RFC7208} §5.5"),
    "spf.too_long": FindingRule(
        "warning",
        "Shorten the record (keep the TXT answer under 512 bytes) e.g. with includes.",
        f"{RFC7208} §3.4"),
    "spf.ip_not_authorized": FindingRule(
        "error",
        "Add the sending IP (ip4:/ip6:) or its provider's include to SPF.",
        f"{RFC7208} §2.6; {GMAIL}"),
    "spf.lookup_failed": FindingRule(
        "error",
        "Check the domain's nameservers: the lookup timed out or failed (not missing).",
        f"{RFC7208} §2.6.6"),
    "dkim.missing": FindingRule(
        "error",
        "Publish the selector's public key as TXT at `<selector>._domainkey.<domain>`.",
        f"{RFC6376} §3.6.2; {GMAIL}"),
    "dkim.revoked": FindingRule(
        "error",
        "The key has an empty `p=`: publish a live key or stop signing with this selector.",
        f"{RFC6376} §3.6.1"),
    "dkim.syntax": FindingRule("error", "Fix the key record: `v=DKIM1; k=rsa; p=<base64 key>`.", f"{RFC6376} §3.6.1"),
    "dkim.weak_key": FindingRule("error", "Rotate to a 2048-bit RSA (or ed25519) key.", "RFC 8301 §3.2"),
    "dkim.short_key": FindingRule(
        "warning",
        "Rotate to a 2048-bit RSA key (1024 bits is the minimum, 2048 recommended).",
        f"RFC 8301 §3.2; {GMAIL}"),
    "dkim.testing": FindingRule(
        "warning",
        "Remove `t=y` once signing works: receivers may ignore test-mode signatures.",
        f"{RFC6376} §3.6.1"),
    "dkim.no_selector": FindingRule(
        "error",
        "Name the DKIM selectors the domain signs with (dkim_selectors in the inventory, or --selector).",
        f"{RFC6376} §3.1; {GMAIL}"),
    "dkim.skipped": FindingRule(
        "error",
        "Give the audit the selector's key record (zone file or nameserver), or --waive dkim.skipped.",
        f"{RFC6376} §3.6.2; {GMAIL}"),
    "dkim.lookup_failed": FindingRule(
        "error",
        "Check the domain's nameservers: the selector lookup timed out or failed.",
        f"{RFC6376} §6.1.2"),
    "dmarc.missing": FindingRule(
        "error",
        "Publish TXT at `_dmarc.<domain>`: `v=DMARC1; p=none; rua=mailto:...` at least.",
        f"{RFC7489} §6.1; {GMAIL}"),
    "dmarc.multiple": FindingRule(
        "error", "Keep exactly one `v=DMARC1` record at `_dmarc.<domain>`.", f"{RFC7489} §6.6.3"),
    "dmarc.syntax": FindingRule(
        "error",
        "Fix the record: `v=DMARC1` first, then `p=none|quarantine|reject` and valid tags.",
        f"{RFC7489} §6.4"),
    "dmarc.policy_none": FindingRule(
        "warning",
        "Move to `p=quarantine` or `p=reject` once reports show aligned mail.",
        f"{RFC7489} §6.3"),
    "dmarc.rua_missing": FindingRule(
        "warning", "Add `rua=mailto:...` so you receive aggregate reports.", f"{RFC7489} §6.3"),
    "dmarc.rua_unauthorized": FindingRule(
        "warning",
        "Have the report destination publish `<domain>._report._dmarc.<dest>` TXT `v=DMARC1`.",
        f"{RFC7489} §7.1"),
    "dmarc.below_floor": FindingRule(
        "error",
        "Raise the DMARC policy (p=) to at least the inventory's dmarc_floor.",
        f"{RFC7489} §6.3"),
    "dmarc.skipped": FindingRule(
        "error",
        "Give the audit the `_dmarc` record (zone file or nameserver), or --waive dmarc.skipped.",
        f"{RFC7489} §6.1; {GMAIL}"),
    "alignment.skipped": FindingRule(
        "error",
        "Alignment needs the DMARC record: give the audit its data, or --waive alignment.skipped.",
        f"{RFC7489} §3.1; {GMAIL}"),
    "dmarc.lookup_failed": FindingRule(
        "error",
        "Check the domain's nameservers: the DMARC lookup timed out or failed.",
        f"{RFC7489} §6.6.3"),
    "alignment.none": FindingRule(
        "error",
        "Use an envelope (Return-Path) domain in the From domain's organization, or sign with DKIM d= that domain.",
        f"{RFC7489} §3.1; {GMAIL}"),
    "ptr.missing": FindingRule(
        "error",
        "Set reverse DNS (PTR) for the sending IP to a name that resolves back to it.",
        f"RFC 1912 §2.1; {GMAIL}"),
    "ptr.mismatch": FindingRule(
        "error",
        "Make the PTR name's A/AAAA record point back at the sending IP.",
        f"RFC 8601 §3; {GMAIL}"),
    "ptr.generic": FindingRule(
        "warning",
        "Use a PTR name under your own domain instead of the provider's generic name.",
        GMAIL),
    "ptr.submission": FindingRule(
        "info",
        "Nothing required: the provider's servers deliver; receivers read this address in the Received header.",
        GMAIL),
    "ptr.skipped": FindingRule(
        "error",
        "Give the audit the sending IPs and their reverse zone (or a nameserver), or --waive ptr.skipped.",
        f"RFC 1912 §2.1; {GMAIL}"),
    "ptr.lookup_failed": FindingRule(
        "error",
        "Check the reverse zone's nameservers: the lookup timed out or failed.",
        "RFC 1912 §2.1"),
    "mx.missing": FindingRule("warning", "Publish MX records so bounces and replies reach you.", "RFC 5321 §5.1"),
    "mx.null": FindingRule(
        "warning", "A Null MX says the domain takes no mail: senders need to receive bounces.", "RFC 7505"),
    "mx.cname": FindingRule("error", "Point MX at a name with A/AAAA records, not a CNAME.", "RFC 2181 §10.3"),
    "mx.lookup_failed": FindingRule(
        "error",
        "Check the domain's nameservers: the MX lookup timed out or failed.",
        "RFC 5321 §5.1"),
    "tls.no_starttls": FindingRule("error", "Enable STARTTLS on the MX host.", f"RFC 3207; {GMAIL}"),
    "tls.cert_invalid": FindingRule(
        "error", "Serve a certificate for the MX name, chaining to a public CA.", "RFC 7672 §3"),
    "tls.cert_expired": FindingRule("error", "Renew the MX host's certificate.", "RFC 5280 §4.1.2.5"),
    "tls.cert_expiring": FindingRule(
        "warning",
        "Renew the MX host's certificate: it expires within 14 days.",
        "RFC 5280 §4.1.2.5"),
    "tls.old_protocol": FindingRule("error", "Enable TLS 1.2 or 1.3 on the MX host.", "RFC 8996"),
    "tls.probe_limit": FindingRule(
        "info",
        "Only the first MX host addresses were probed; check the rest by hand or reduce the MX set.",
        "RFC 3207"),
    "tls.lookup_failed": FindingRule(
        "error",
        "The MX host did not answer in time: check it is up and reachable on its SMTP port.",
        "RFC 3207"),
    "mta_sts.missing": FindingRule(
        "info",
        "Publish `_mta-sts.<domain>` TXT `v=STSv1; id=...` and a policy file.",
        "RFC 8461 §3.1"),
    "mta_sts.invalid": FindingRule("warning", "Fix the record: `v=STSv1; id=<1-32 alphanumerics>`.", "RFC 8461 §3.1"),
    "mta_sts.lookup_failed": FindingRule(
        "error",
        "Check the domain's nameservers: the MTA-STS lookup timed out or failed.",
        "RFC 8461 §3.1"),
    "tlsrpt.missing": FindingRule(
        "info", "Publish `_smtp._tls.<domain>` TXT `v=TLSRPTv1; rua=mailto:...`.", "RFC 8460 §3"),
    "tlsrpt.invalid": FindingRule(
        "warning", "Fix the record: `v=TLSRPTv1; rua=mailto:...` or `https:`.", "RFC 8460 §3"),
    "tlsrpt.lookup_failed": FindingRule(
        "error",
        "Check the domain's nameservers: the TLS-RPT lookup timed out or failed.",
        "RFC 8460 §3"),
    "dnsbl.ip_listed": FindingRule(
        "error",
        "Find out why the IP is listed, fix it, and request delisting (or rotate the IP).",
        "RFC 5782"),
    "dnsbl.domain_listed": FindingRule(
        "error",
        "Find out why the domain is listed, fix it, and request delisting.",
        "RFC 5782"),
    "dnsbl.refused": FindingRule(
        "warning",
        "The list refused the query (rate limit or public resolver): query it from your own resolver.",
        "RFC 5782 §2.1"),
    "dnsbl.lookup_failed": FindingRule(
        "error", "The list did not answer: retry, or check the list's zone name.", "RFC 5782"),
    "tracking.unresolved": FindingRule(
        "error", "Point the tracking domain at the host of `sendhost sender web` (an A or AAAA record).",
        "docs/tracking.md"),
    "tracking.lookup_failed": FindingRule(
        "error", "Check the tracking domain's nameservers: its address lookup timed out or failed.",
        "docs/tracking.md"),
    "tracking.tls_invalid": FindingRule(
        "error", "Serve a certificate valid for the tracking domain (e.g. from Let's Encrypt) in front of "
        "`sendhost sender web`: a link that warns is a link nobody follows.", "docs/tracking.md"),
    "tracking.https_unreachable": FindingRule(
        "error", "Serve HTTPS on the tracking domain (port 443) in front of `sendhost sender web`.",
        "docs/tracking.md"),
    "tracking.listed": FindingRule(
        "error", "Stop sending with this tracking domain, find out why it is listed and request delisting; a "
        "fresh domain of your own is the usual way out.", "RFC 5782; docs/tracking.md"),
    "audit.no_data": FindingRule(
        "error",
        "Add the domain's zone file (<domain>.zone) to --zone-dir, or pass --nameserver to audit it live.",
        "sendhost"),
    "audit.deadline": FindingRule(
        "error",
        "The domain's audit ran past its deadline: raise --deadline or check slow nameservers/MX hosts.",
        "sendhost"),
    "message.unsubscribe_missing": FindingRule(
        "error",
        "Add `List-Unsubscribe: <https://...>` and `List-Unsubscribe-Post: List-Unsubscribe=One-Click`.",
        f"RFC 8058 §3.1; {GMAIL}"),
    "message.unsubscribe_not_https": FindingRule(
        "error",
        "Put an https URI in List-Unsubscribe for one-click unsubscribe.",
        "RFC 8058 §3.1"),
    "message.unsubscribe_post_missing": FindingRule(
        "error",
        "Add `List-Unsubscribe-Post: List-Unsubscribe=One-Click`.",
        "RFC 8058 §3.1"),
    "message.unsubscribe_no_brackets": FindingRule(
        "warning",
        "Write each List-Unsubscribe URI in angle brackets: `List-Unsubscribe: <https://...>`.",
        "RFC 2369 §2; RFC 8058 §3.1"),
    "message.unsubscribe_link_missing": FindingRule(
        "error",
        "Put a clearly visible unsubscribe link in every text and HTML body part.",
        f"{GMAIL} (a clearly visible unsubscribe link in the body)"),
    "message.dkim_key_missing": FindingRule(
        "error",
        "Publish the signing selector's key at `<s>._domainkey.<d>`, or sign with a selector that has one.",
        f"{RFC6376} §6.1.2"),
    "message.dkim_missing": FindingRule(
        "error", "Sign the message with DKIM (d= the From domain).", f"{RFC6376}; {GMAIL}"),
    "message.dkim_invalid": FindingRule(
        "error",
        "The DKIM signature does not verify with the key in DNS: check the key and the signer.",
        f"{RFC6376} §6"),
    "message.unsubscribe_unsigned": FindingRule(
        "error",
        "Include List-Unsubscribe and List-Unsubscribe-Post in the DKIM signature's h=.",
        "RFC 8058 §4"),
    "message.alignment": FindingRule(
        "error",
        "Align From with the DKIM d= domain or the Return-Path domain.",
        f"{RFC7489} §3.1; {GMAIL}"),
    # from the receiver's side (--placement): a placement message's own verdicts, as the seed's provider wrote them
    "placement.dkim_fail": FindingRule(
        "error",
        "Publish the signing selector's key (header.s in the evidence) at `<s>._domainkey.<d>`, or make the "
        "provider sign with a selector whose key is published; then run `sendhost placement test` again.",
        f"{RFC6376} §6; RFC 8601 §2.7.1"),
    "placement.dkim_unaligned": FindingRule(
        "error",
        "Make the provider sign with the From domain (its custom DKIM domain setting) so DKIM aligns for DMARC.",
        f"{RFC7489} §3.1.1; {GMAIL}"),
    "placement.spf_softfail": FindingRule(
        "warning",
        "Authorize the provider's sending addresses in the envelope domain's SPF record (its include).",
        f"{RFC7208} §8.5"),
    "placement.dmarc_fail": FindingRule(
        "error",
        "Align a passing DKIM signature or SPF domain with the From domain; the evidence says which failed.",
        f"{RFC7489} §6.6; {GMAIL}"),
}


def finding(code: str, message: str, evidence: str = "", location: Location | None = None,
            subject: str = "") -> Finding:
    """Build a finding whose severity, remediation and reference come from the catalog."""
    rule = CATALOG[code]
    return Finding(code, rule.severity, message, evidence, rule.remediation, rule.reference, location, subject)


def clip(text: str, limit: int = 300) -> str:
    """Evidence as served, cut to a readable length (a 64 KB TXT record must not flood a report)."""
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text)} characters)"


@dataclass(frozen=True)
class Check:
    """One check run on one domain: `pass`, `fail` (an error), `warn` (warnings/info only) or `skip`.

    `note` says why a check was skipped (offline, no data, not in the profile): a skip is never a pass."""

    name: str
    status: str
    note: str = ""


@dataclass(frozen=True)
class DomainReport:
    domain: str
    findings: tuple[Finding, ...]
    checks: tuple[Check, ...] = field(default_factory=tuple)


def check_status(findings: list[Finding] | tuple[Finding, ...]) -> str:
    """The status of one check from its findings (waived findings do not count)."""
    counted = [f for f in findings if not f.waived]
    if any(f.severity == "error" for f in counted):
        return "fail"
    if any(f.severity == "warning" for f in counted):
        return "warn"
    return "pass"


def at_or_above(finding_: Finding, threshold: str) -> bool:
    """True when the finding counts against the gate at `threshold` (a waived finding never does)."""
    return not finding_.waived and SEVERITY_RANK[finding_.severity] >= SEVERITY_RANK[threshold]


def waive(reports: list[DomainReport], codes: set[str]) -> list[DomainReport]:
    """Mark findings whose code is in `codes` as waived, and recompute each check's status without them."""
    if not codes:
        return reports
    out = []
    for report in reports:
        findings = tuple(replace(f, waived=True) if f.code in codes else f for f in report.findings)
        checks = tuple(c if c.status == "skip" else replace(c, status=check_status(
            [f for f in findings if f.area == c.name or (c.name == "deadline" and f.area == "audit")]))
            for c in report.checks)
        out.append(DomainReport(report.domain, findings, checks))
    return out
