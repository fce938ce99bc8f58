"""Findings: small frozen records with a stable dotted code, a severity, evidence, remediation and reference.

Severity, remediation and reference live in one catalog keyed by code, so a code always means the same thing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
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

    @property
    def area(self) -> str:
        return self.code.split(".", 1)[0]


@dataclass(frozen=True)
class Rule:
    severity: Severity
    remediation: str
    reference: str


RFC7208 = "RFC 7208"
RFC6376 = "RFC 6376"
RFC7489 = "RFC 7489"
GMAIL = "Google email sender guidelines (support.google.com/a/answer/81126)"

CATALOG: dict[str, Rule] = {
    "spf.missing": Rule(
        "error",
        "Publish one TXT record starting `v=spf1` ending in `-all` or `~all`.",
        f"{RFC7208} §4.5; {GMAIL}"),
    "spf.multiple": Rule("error", "Merge the SPF TXT records into exactly one `v=spf1` record.", f"{RFC7208} §3.2"),
    "spf.syntax": Rule("error", "Fix the SPF record so every term is a valid mechanism or modifier.", f"{RFC7208} §12"),
    "spf.lookup_limit": Rule(
        "error",
        "Flatten includes or drop mechanisms: at most 10 DNS-querying terms in total.",
        f"{RFC7208} §4.6.4"),
    "spf.void_limit": Rule(
        "error",
        "Remove terms pointing at names that do not exist (at most 2 void lookups).",
        f"{RFC7208} §4.6.4"),
    "spf.include_missing": Rule(
        "error",
        "Remove the include, or publish an SPF record at its target.",
        f"{RFC7208} §5.2"),
    "spf.permissive_all": Rule("error", "End the record with `-all` or `~all`.", f"{RFC7208} §5.1; {GMAIL}"),
    "spf.ptr_mechanism": Rule("warning", "Replace `ptr` with `ip4`/`ip6`/`a` mechanisms.", f"{RFC7208} §5.5"),
    "spf.too_long": Rule(
        "warning",
        "Shorten the record (keep the TXT answer under 512 bytes) e.g. with includes.",
        f"{RFC7208} §3.4"),
    "spf.ip_not_authorized": Rule(
        "error",
        "Add the sending IP (ip4:/ip6:) or its provider's include to SPF.",
        f"{RFC7208} §2.6; {GMAIL}"),
    "spf.lookup_failed": Rule(
        "error",
        "Check the domain's nameservers: the lookup timed out or failed (not missing).",
        f"{RFC7208} §2.6.6"),
    "dkim.missing": Rule(
        "error",
        "Publish the selector's public key as TXT at `<selector>._domainkey.<domain>`.",
        f"{RFC6376} §3.6.2; {GMAIL}"),
    "dkim.revoked": Rule(
        "error",
        "The key has an empty `p=`: publish a live key or stop signing with this selector.",
        f"{RFC6376} §3.6.1"),
    "dkim.syntax": Rule("error", "Fix the key record: `v=DKIM1; k=rsa; p=<base64 key>`.", f"{RFC6376} §3.6.1"),
    "dkim.weak_key": Rule("error", "Rotate to a 2048-bit RSA (or ed25519) key.", "RFC 8301 §3.2"),
    "dkim.short_key": Rule(
        "warning",
        "Rotate to a 2048-bit RSA key (1024 bits is the minimum, 2048 recommended).",
        f"RFC 8301 §3.2; {GMAIL}"),
    "dkim.testing": Rule(
        "warning",
        "Remove `t=y` once signing works: receivers may ignore test-mode signatures.",
        f"{RFC6376} §3.6.1"),
    "dkim.lookup_failed": Rule(
        "error",
        "Check the domain's nameservers: the selector lookup timed out or failed.",
        f"{RFC6376} §6.1.2"),
    "dmarc.missing": Rule(
        "error",
        "Publish TXT at `_dmarc.<domain>`: `v=DMARC1; p=none; rua=mailto:...` at least.",
        f"{RFC7489} §6.1; {GMAIL}"),
    "dmarc.multiple": Rule("error", "Keep exactly one `v=DMARC1` record at `_dmarc.<domain>`.", f"{RFC7489} §6.6.3"),
    "dmarc.syntax": Rule(
        "error",
        "Fix the record: `v=DMARC1` first, then `p=none|quarantine|reject` and valid tags.",
        f"{RFC7489} §6.4"),
    "dmarc.policy_none": Rule(
        "warning",
        "Move to `p=quarantine` or `p=reject` once reports show aligned mail.",
        f"{RFC7489} §6.3"),
    "dmarc.rua_missing": Rule("warning", "Add `rua=mailto:...` so you receive aggregate reports.", f"{RFC7489} §6.3"),
    "dmarc.rua_unauthorized": Rule(
        "warning",
        "Have the report destination publish `<domain>._report._dmarc.<dest>` TXT `v=DMARC1`.",
        f"{RFC7489} §7.1"),
    "dmarc.lookup_failed": Rule(
        "error",
        "Check the domain's nameservers: the DMARC lookup timed out or failed.",
        f"{RFC7489} §6.6.3"),
    "alignment.none": Rule(
        "error",
        "Use an envelope (Return-Path) domain in the From domain's organization, or sign with DKIM d= that domain.",
        f"{RFC7489} §3.1; {GMAIL}"),
    "ptr.missing": Rule(
        "error",
        "Set reverse DNS (PTR) for the sending IP to a name that resolves back to it.",
        f"RFC 1912 §2.1; {GMAIL}"),
    "ptr.mismatch": Rule(
        "error",
        "Make the PTR name's A/AAAA record point back at the sending IP.",
        f"RFC 8601 §3; {GMAIL}"),
    "ptr.generic": Rule(
        "warning",
        "Use a PTR name under your own domain instead of the provider's generic name.",
        GMAIL),
    "ptr.lookup_failed": Rule(
        "error",
        "Check the reverse zone's nameservers: the lookup timed out or failed.",
        "RFC 1912 §2.1"),
    "mx.missing": Rule("warning", "Publish MX records so bounces and replies reach you.", "RFC 5321 §5.1"),
    "mx.null": Rule("warning", "A Null MX says the domain takes no mail: senders need to receive bounces.", "RFC 7505"),
    "mx.cname": Rule("error", "Point MX at a name with A/AAAA records, not a CNAME.", "RFC 2181 §10.3"),
    "mx.lookup_failed": Rule(
        "error",
        "Check the domain's nameservers: the MX lookup timed out or failed.",
        "RFC 5321 §5.1"),
    "tls.no_starttls": Rule("error", "Enable STARTTLS on the MX host.", f"RFC 3207; {GMAIL}"),
    "tls.cert_invalid": Rule("error", "Serve a certificate for the MX name, chaining to a public CA.", "RFC 7672 §3"),
    "tls.cert_expired": Rule("error", "Renew the MX host's certificate.", "RFC 5280 §4.1.2.5"),
    "tls.cert_expiring": Rule(
        "warning",
        "Renew the MX host's certificate: it expires within 14 days.",
        "RFC 5280 §4.1.2.5"),
    "tls.old_protocol": Rule("error", "Enable TLS 1.2 or 1.3 on the MX host.", "RFC 8996"),
    "tls.lookup_failed": Rule(
        "error",
        "The MX host did not answer in time: check it is up and reachable on its SMTP port.",
        "RFC 3207"),
    "mta_sts.missing": Rule(
        "info",
        "Publish `_mta-sts.<domain>` TXT `v=STSv1; id=...` and a policy file.",
        "RFC 8461 §3.1"),
    "mta_sts.invalid": Rule("warning", "Fix the record: `v=STSv1; id=<1-32 alphanumerics>`.", "RFC 8461 §3.1"),
    "mta_sts.lookup_failed": Rule(
        "error",
        "Check the domain's nameservers: the MTA-STS lookup timed out or failed.",
        "RFC 8461 §3.1"),
    "tlsrpt.missing": Rule("info", "Publish `_smtp._tls.<domain>` TXT `v=TLSRPTv1; rua=mailto:...`.", "RFC 8460 §3"),
    "tlsrpt.invalid": Rule("warning", "Fix the record: `v=TLSRPTv1; rua=mailto:...` or `https:`.", "RFC 8460 §3"),
    "tlsrpt.lookup_failed": Rule(
        "error",
        "Check the domain's nameservers: the TLS-RPT lookup timed out or failed.",
        "RFC 8460 §3"),
    "dnsbl.ip_listed": Rule(
        "error",
        "Find out why the IP is listed, fix it, and request delisting (or rotate the IP).",
        "RFC 5782"),
    "dnsbl.domain_listed": Rule(
        "error",
        "Find out why the domain is listed, fix it, and request delisting.",
        "RFC 5782"),
    "dnsbl.refused": Rule(
        "warning",
        "The list refused the query (rate limit or public resolver): query it from your own resolver.",
        "RFC 5782 §2.1"),
    "dnsbl.lookup_failed": Rule("error", "The list did not answer: retry, or check the list's zone name.", "RFC 5782"),
    "audit.deadline": Rule(
        "error",
        "The domain's audit ran past its deadline: raise --deadline or check slow nameservers/MX hosts.",
        "sendhost"),
    "message.unsubscribe_missing": Rule(
        "error",
        "Add `List-Unsubscribe: <https://...>` and `List-Unsubscribe-Post: List-Unsubscribe=One-Click`.",
        f"RFC 8058 §3.1; {GMAIL}"),
    "message.unsubscribe_not_https": Rule(
        "error",
        "Put an https URI in List-Unsubscribe for one-click unsubscribe.",
        "RFC 8058 §3.1"),
    "message.unsubscribe_post_missing": Rule(
        "error",
        "Add `List-Unsubscribe-Post: List-Unsubscribe=One-Click`.",
        "RFC 8058 §3.1"),
    "message.dkim_missing": Rule("error", "Sign the message with DKIM (d= the From domain).", f"{RFC6376}; {GMAIL}"),
    "message.dkim_invalid": Rule(
        "error",
        "The DKIM signature does not verify with the key in DNS: check the key and the signer.",
        f"{RFC6376} §6"),
    "message.unsubscribe_unsigned": Rule(
        "error",
        "Include List-Unsubscribe and List-Unsubscribe-Post in the DKIM signature's h=.",
        "RFC 8058 §4"),
    "message.alignment": Rule(
        "error",
        "Align From with the DKIM d= domain or the Return-Path domain.",
        f"{RFC7489} §3.1; {GMAIL}"),
}


def finding(code: str, message: str, evidence: str = "", location: Location | None = None) -> Finding:
    """Build a finding whose severity, remediation and reference come from the catalog."""
    rule = CATALOG[code]
    return Finding(code, rule.severity, message, evidence, rule.remediation, rule.reference, location)


def clip(text: str, limit: int = 300) -> str:
    """Evidence as served, cut to a readable length (a 64 KB TXT record must not flood a report)."""
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text)} characters)"


@dataclass(frozen=True)
class Check:
    """One check run on one domain: `pass`, `fail` (an error), `warn` (warnings/info only) or `skip`."""

    name: str
    status: str


@dataclass(frozen=True)
class DomainReport:
    domain: str
    findings: tuple[Finding, ...]
    checks: tuple[Check, ...] = field(default_factory=tuple)


def check_status(findings: list[Finding] | tuple[Finding, ...]) -> str:
    """The status of one check from its findings."""
    if any(f.severity == "error" for f in findings):
        return "fail"
    if any(f.severity == "warning" for f in findings):
        return "warn"
    return "pass"


def at_or_above(finding_: Finding, threshold: str) -> bool:
    return SEVERITY_RANK[finding_.severity] >= SEVERITY_RANK[threshold]
