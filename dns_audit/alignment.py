"""DMARC identifier alignment of the From domain with the envelope (SPF) domain and the DKIM signing domain."""

from __future__ import annotations

from dns_audit.dmarc import DmarcRecord
from dns_audit.findings import Finding, finding
from dns_audit.orgdomain import aligned


def audit_alignment(from_domain: str, envelope_domain: str, dkim_domain: str | None,
                    record: DmarcRecord | None) -> list[Finding]:
    """`alignment.none` when neither SPF (envelope) nor DKIM (a working key at `dkim_domain`) aligns with From.

    `dkim_domain` is None when no selector of the From domain has a usable key. No I/O.
    """
    aspf = record.aspf if record else "r"
    adkim = record.adkim if record else "r"
    spf_ok = aligned(from_domain, envelope_domain, aspf)
    dkim_ok = dkim_domain is not None and aligned(from_domain, dkim_domain, adkim)
    if spf_ok or dkim_ok:
        return []
    dkim_text = f"DKIM d={dkim_domain}" if dkim_domain else "no usable DKIM key on the From domain"
    return [finding("alignment.none", f"From {from_domain} aligns with neither SPF nor DKIM",
                    f"envelope {envelope_domain} (aspf={aspf}), {dkim_text} (adkim={adkim})")]
