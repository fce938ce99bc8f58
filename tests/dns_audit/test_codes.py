"""Every finding code is produced by a fixture domain served by the real NSD (and real SMTP/TLS servers)."""

from __future__ import annotations

import pytest

from tests.dns_audit import zones as z
from tests.dns_audit.conftest import Audit, codes

# (domain, extra audit arguments, the exact set of codes expected)
CASES = [
    ("spf-missing.test", {}, {"spf.missing"}),
    ("spf-multiple.test", {}, {"spf.multiple"}),
    ("spf-syntax.test", {}, {"spf.syntax"}),
    ("spf-lookups.test", {}, {"spf.lookup_limit"}),
    ("spf-void.test", {}, {"spf.void_limit"}),
    ("spf-include.test", {}, {"spf.include_void"}),
    ("spf-plusall.test", {}, {"spf.permissive_all"}),
    ("spf-noall.test", {}, {"spf.permissive_all"}),
    ("spf-ptr.test", {}, {"spf.ptr_mechanism"}),
    ("spf-long.test", {}, {"spf.too_long"}),
    ("spf-ip.test", {"ips": (z.CLEAN_IP,)}, {"spf.ip_not_authorized"}),
    ("dkim-missing.test", {}, {"dkim.missing"}),
    ("dkim-revoked.test", {}, {"dkim.revoked"}),
    ("dkim-syntax.test", {}, {"dkim.syntax"}),
    ("dkim-weak.test", {}, {"dkim.weak_key"}),
    ("dkim-short.test", {}, {"dkim.short_key"}),
    ("dkim-testing.test", {}, {"dkim.testing"}),
    ("dmarc-missing.test", {}, {"dmarc.missing"}),
    ("dmarc-multiple.test", {}, {"dmarc.multiple"}),
    ("dmarc-syntax.test", {}, {"dmarc.syntax"}),
    ("dmarc-none.test", {}, {"dmarc.policy_none"}),
    ("dmarc-norua.test", {}, {"dmarc.rua_missing"}),
    ("dmarc-external.test", {}, {"dmarc.rua_unauthorized"}),
    ("alignment-none.test", {"selectors": (), "envelope": "bounce.shared.test"},
     {"alignment.none", "dkim.no_selector"}),
    ("ptr.test", {"ips": (z.NO_PTR_IP,)}, {"ptr.missing"}),
    ("ptr.test", {"ips": (z.MISMATCH_PTR_IP,)}, {"ptr.mismatch"}),
    ("ptr.test", {"ips": (z.GENERIC_PTR_IP,)}, {"ptr.generic"}),
    ("mx-missing.test", {}, {"mx.missing"}),
    ("mx-null.test", {}, {"mx.null"}),
    ("mx-cname.test", {}, {"mx.cname"}),
    ("tls-nostarttls.test", {}, {"tls.no_starttls"}),
    ("tls-wrongname.test", {}, {"tls.cert_invalid"}),
    ("tls-expired.test", {}, {"tls.cert_expired"}),
    ("tls-expiring.test", {}, {"tls.cert_expiring"}),
    ("tls-old.test", {}, {"tls.old_protocol"}),
    ("tls-down.test", {}, {"tls.lookup_failed"}),
    ("mta-sts-missing.test", {}, {"mta_sts.missing"}),
    ("mta-sts-invalid.test", {}, {"mta_sts.invalid"}),
    ("tlsrpt-missing.test", {}, {"tlsrpt.missing"}),
    ("tlsrpt-invalid.test", {}, {"tlsrpt.invalid"}),
    ("clean.test", {"ips": (z.LISTED_IP,)}, {"dnsbl.ip_listed"}),
    ("listed.test", {}, {"dnsbl.domain_listed"}),
    ("clean.test", {"ips": (z.REFUSING_IP,)}, {"dnsbl.refused"}),
    ("clean.test", {"dnsbl": ("unserved.example",)}, {"dnsbl.refused"}),
]


@pytest.mark.parametrize(("domain", "kwargs", "expected"), CASES,
                         ids=[f"{d}-{'+'.join(sorted(e))}" for d, _, e in CASES])
def test_fixture_domain_produces_exactly_its_code(audit: Audit, domain: str, kwargs: dict[str, object],
                                                  expected: set[str]) -> None:
    report = audit(domain, **kwargs)
    assert codes(report) == expected, [f"{f.code}: {f.message} [{f.evidence}]" for f in report.findings]


def test_every_finding_carries_evidence_remediation_and_reference(audit: Audit) -> None:
    report = audit("spf-plusall.test")
    [item] = report.findings
    assert item.severity == "error"
    assert "+all" in item.evidence
    assert item.remediation and "RFC 7208" in item.reference


def test_dmarc_falls_back_to_the_organizational_domain(audit: Audit) -> None:
    report = audit("sub.dmarc-org.test")
    assert "dmarc.missing" not in codes(report)
    assert codes(report) == set()


def test_authorized_external_report_destination_is_not_flagged(audit: Audit) -> None:
    assert codes(audit("dmarc-authorized.test")) == set()


def test_baseline_profile_skips_the_bulk_sender_dmarc_rules(audit: Audit) -> None:
    report = audit("dmarc-missing.test", profile="baseline")
    assert codes(report) == set()
    assert {c.name: c.status for c in report.checks}["dmarc"] == "skip"


def test_a_listed_ip_is_an_error_and_a_refusal_is_only_a_warning(audit: Audit) -> None:
    listed = audit("clean.test", ips=(z.LISTED_IP,))
    refused = audit("clean.test", ips=(z.REFUSING_IP,))
    assert [f.severity for f in listed.findings] == ["error"]
    assert "listed for testing" in listed.findings[0].evidence
    assert [f.severity for f in refused.findings] == ["warning"]
    assert "127.255.255.254" in refused.findings[0].evidence
