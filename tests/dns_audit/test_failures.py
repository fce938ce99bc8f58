"""Lookups that time out or SERVFAIL are `<area>.lookup_failed`, never "missing"; deadlines and bad input."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator

import pytest

from dns_audit.dnsbl import reversed_ip
from tests.dns_audit import zones as z
from tests.dns_audit.conftest import Audit, codes
from tests.support.dns_faults import FaultProxy
from tests.support.nsd import NsdServer

AREAS = {"spf", "dkim", "dmarc", "ptr", "mx", "mta_sts", "tlsrpt", "dnsbl"}


@pytest.fixture
def proxy(nsd: NsdServer) -> Iterator[FaultProxy]:
    """NSD behind a fault proxy: silent.test times out, flaky.test and FAULTY_IP's names answer SERVFAIL."""
    faulty = (ipaddress.ip_address(z.FAULTY_IP).reverse_pointer, f"{reversed_ip(z.FAULTY_IP)}.{z.DNSBL_ZONE}")
    with FaultProxy((nsd.host, nsd.port), drop=("silent.test",), servfail=("flaky.test", *faulty)) as running:
        yield running


@pytest.mark.parametrize("domain", ["flaky.test", "silent.test"])
def test_servfail_and_timeout_are_lookup_failed_in_every_area_never_missing(
        audit: Audit, proxy: FaultProxy, domain: str) -> None:
    report = audit(domain, ips=(z.FAULTY_IP,), nameserver=proxy.address, timeout=0.2)
    found = codes(report)
    assert {f"{area}.lookup_failed" for area in AREAS} <= found, sorted(found)
    assert not [c for c in found if c.endswith((".missing", ".include_void", ".ip_not_authorized"))], sorted(found)


def test_a_domain_past_its_deadline_reports_audit_deadline(audit: Audit, proxy: FaultProxy) -> None:
    report = audit("silent.test", nameserver=proxy.address, timeout=0.5, deadline=0.3)
    # the apex TXT was already asked (and failed) by the reachability probe, so SPF may finish in time
    assert "audit.deadline" in codes(report)
    assert codes(report) <= {"audit.deadline", "spf.lookup_failed"}
    assert {c.name: c.status for c in report.checks}["deadline"] == "fail"
    assert {c.name: c.status for c in report.checks}["tlsrpt"] == "skip"


def test_garbage_txt_records_are_syntax_findings(audit: Audit) -> None:
    found = codes(audit("garbage.test"))
    assert {"spf.syntax", "dmarc.syntax"} <= found


def test_a_64_kb_spf_record_over_tcp_is_a_finding_not_a_hang(audit: Audit) -> None:
    report = audit("big.test")
    assert "spf.too_long" in codes(report)
    [long] = [f for f in report.findings if f.code == "spf.too_long"]
    assert len(long.evidence) < 400  # evidence is clipped, not 60 KB in every report
    assert "characters)" in long.evidence
