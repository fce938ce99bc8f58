"""The audit from the receiver's side (`sendhost dns audit --placement`): findings where a placement message's own
verdicts, as the seed's provider wrote them, contradict what the DNS audit sees: a DKIM signature that failed or
was made by a domain that does not align with the From, an SPF softfail, a DMARC fail though the domain's DMARC
record parses. "Green DNS checkmarks lie": a record can look right while the signature the provider adds fails.

No I/O: the caller reads each mailbox's latest delivered placement messages (sender.placement) and passes them
here with the domain reports; each finding names the mailbox, the seed and the header it read.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from dns_audit.findings import Check, DomainReport, Finding, check_status, clip, finding

# A DKIM result that is no pass of a signature (RFC 8601 §2.7.1): a signature present and not verified.
DKIM_FAILED = ("fail", "permerror", "neutral", "policy")
# Findings of the domain's own DMARC check that mean its record does not parse, or was not read.
DMARC_UNREAD = ("dmarc.missing", "dmarc.multiple", "dmarc.syntax", "dmarc.lookup_failed", "dmarc.skipped")


@dataclass(frozen=True)
class Delivered:
    """One placement message found in a seed, with the receiver's verdicts (sender.placement's result)."""

    mailbox: str
    seed: str
    provider: str
    test: int
    spf: str | None
    dkim: str | None
    dkim_domain: str | None
    dmarc: str | None
    header: str | None  # the trusted Authentication-Results header(s), one a line

    @property
    def domain(self) -> str:
        return self.mailbox.rpartition("@")[2].lower()

    def said(self, method: str) -> str:
        """The header line that holds `method`'s result, as the receiver wrote it."""
        lines = (self.header or "").splitlines()
        return clip(next((line for line in lines if f"{method}=" in line), lines[0] if lines else ""))


def placement_findings(reports: list[DomainReport], delivered: list[Delivered]) -> list[DomainReport]:
    """`reports` with each audited domain's placement findings added (and a `placement` check); messages from a
    domain not audited are left out."""
    by_domain: dict[str, list[Delivered]] = {}
    for message in delivered:
        by_domain.setdefault(message.domain, []).append(message)
    out = []
    for report in reports:
        mine = by_domain.get(report.domain.lower(), [])
        if not mine:
            out.append(report)
            continue
        dmarc_parses = not any(f.code in DMARC_UNREAD for f in report.findings)
        found = [f for message in mine for f in _contradictions(message, dmarc_parses)]
        checks = (*report.checks, Check("placement", check_status(found)))
        out.append(replace(report, findings=(*report.findings, *found), checks=checks))
    return out


def _contradictions(message: Delivered, dmarc_parses: bool) -> list[Finding]:
    about = f"{message.mailbox} → {message.seed}"
    where = f"the {message.provider} seed {message.seed} (placement test {message.test})"
    found: list[Finding] = []
    signer = f" signed d={message.dkim_domain}" if message.dkim_domain else ""
    if message.dkim in DKIM_FAILED:
        found.append(finding("placement.dkim_fail", f"{where} found dkim={message.dkim} on the message from "
                             f"{message.mailbox}{signer}", message.said("dkim"), subject=about))
    elif message.dkim == "pass" and message.dkim_domain and not _aligned(message.dkim_domain, message.domain):
        found.append(finding("placement.dkim_unaligned", f"{where}: the message from {message.mailbox} passed DKIM "
                             f"signed by {message.dkim_domain}, which does not align with {message.domain}",
                             message.said("dkim"), subject=about))
    if message.spf == "softfail":
        found.append(finding("placement.spf_softfail", f"{where} found spf=softfail for the message from "
                             f"{message.mailbox}", message.said("spf"), subject=about))
    if message.dmarc == "fail" and dmarc_parses:
        found.append(finding("placement.dmarc_fail", f"{where} found dmarc=fail for the message from "
                             f"{message.mailbox}, though the DMARC record of {message.domain} parses",
                             message.said("dmarc"), subject=about))
    return found


def _aligned(signing: str, from_domain: str) -> bool:
    a, b = signing.rstrip(".").lower(), from_domain.rstrip(".").lower()
    return a == b or a.endswith("." + b) or b.endswith("." + a)
