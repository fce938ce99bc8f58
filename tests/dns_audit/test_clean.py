"""The clean fixture domain passes every check against the real servers."""

from __future__ import annotations

from tests.dns_audit import zones as z
from tests.dns_audit.conftest import Audit, codes


def test_clean_domain_has_no_findings_and_every_check_passes(audit: Audit) -> None:
    report = audit("clean.test", ips=(z.CLEAN_IP,))
    assert report.findings == (), [f"{f.code}: {f.message}" for f in report.findings]
    assert {c.name: c.status for c in report.checks} == {
        "spf": "pass", "dkim": "pass", "dmarc": "pass", "alignment": "pass", "ptr": "pass", "mx": "pass",
        "tls": "pass", "mta_sts": "pass", "tlsrpt": "pass", "dnsbl": "pass"}
    assert codes(report) == set()
