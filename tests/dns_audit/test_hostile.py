"""A hostile DNS or SMTP answer costs one finding, not the audit (issue 19)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from dns_audit.audit import AuditOptions, DomainTarget, run_audit
from dns_audit.resolver import Answer, LiveResolver, parse_nameserver
from dns_audit.spf import check_host
from dns_audit.tls import MAX_PROBES, TlsProbe
from tests.conftest import run_cli
from tests.dns_audit import zones as z
from tests.dns_audit.conftest import Audit, Mail, codes
from tests.support.nsd import NsdServer


def _options(mail: Mail) -> AuditOptions:
    return AuditOptions(ip_zones=(z.DNSBL_ZONE,), domain_zones=(z.DNSBL_ZONE,),
                        tls=TlsProbe(port=mail.port, ca_file=mail.ca_file, timeout=5), deadline=60)


def test_a_500_deep_include_chain_is_one_finding_and_the_other_domains_are_audited(nsd: NsdServer,
                                                                                 mail: Mail) -> None:
    resolver = LiveResolver([parse_nameserver(nsd.address)], timeout=1, retries=1)
    targets = [DomainTarget("spf-deep.test", (z.SELECTOR,)), DomainTarget("clean.test", (z.SELECTOR,))]
    deep, clean = run_audit(resolver, targets, _options(mail))
    assert {f.code for f in deep.findings} == {"spf.lookup_limit"}
    assert clean.findings == ()
    assert resolver.distinct_names < 60  # the walk stopped where receivers stop, not 500 levels down


def test_check_host_on_the_deep_chain_is_a_permerror(nsd: NsdServer) -> None:
    resolver = LiveResolver([parse_nameserver(nsd.address)], timeout=1, retries=1)
    assert asyncio.run(check_host(resolver, "192.0.2.1", "spf-deep.test")) == "permerror"


def test_an_mx_sending_a_line_over_64_kib_during_starttls_is_one_finding(audit: Audit) -> None:
    report = audit("tls-hostile.test")
    assert codes(report) == {"tls.lookup_failed"}
    assert "longer than" in report.findings[0].message


def test_mx_times_address_probes_are_capped(audit: Audit) -> None:
    report = audit("tls-many.test")
    failed = [f for f in report.findings if f.code == "tls.lookup_failed"]
    assert len(failed) == MAX_PROBES
    [capped] = [f for f in report.findings if f.code == "tls.probe_limit"]
    assert capped.severity == "info" and f"{12 - MAX_PROBES} MX address(es)" in capped.message


def test_a_1024_bit_rsa_certificate_fails_verification(audit: Audit) -> None:
    report = audit("tls-weakkey.test")
    assert codes(report) == {"tls.cert_invalid"}, [f.message for f in report.findings]


class _Exploding:
    """A resolver whose TXT answers for one name break the check reading them (as a parser bug would)."""

    def __init__(self, inner: LiveResolver, name: str) -> None:
        self.inner, self.name = inner, name

    async def query(self, name: str, rdtype: str) -> Answer:
        if name == self.name:
            raise RecursionError("maximum recursion depth exceeded")
        return await self.inner.query(name, rdtype)

    def covers(self, domain: str) -> bool:
        return True

    def describe(self) -> str:
        return self.inner.describe()


def test_a_check_that_breaks_is_its_area_lookup_failed_and_the_rest_still_run(nsd: NsdServer, mail: Mail) -> None:
    resolver = _Exploding(LiveResolver([parse_nameserver(nsd.address)], timeout=1, retries=1), "_dmarc.clean.test")
    [report] = run_audit(resolver, [DomainTarget("clean.test", (z.SELECTOR,))], _options(mail))
    assert codes(report) == {"dmarc.lookup_failed"}
    assert "RecursionError" in report.findings[0].message
    statuses = {c.name: c.status for c in report.checks}
    assert statuses["spf"] == statuses["dkim"] == statuses["tls"] == "pass"


def test_generate_in_a_zone_file_is_refused_naming_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "gen.test.zone").write_text(
        "$ORIGIN gen.test.\n$TTL 300\n@ IN SOA ns1 host 1 2 3 4 5\n$GENERATE 1-10000000 h$ IN A 192.0.2.1\n")
    result = run_cli("dns", "audit", "--zone-dir", str(tmp_path), timeout=30)
    assert result.returncode == 2
    assert f"error: {tmp_path / 'gen.test.zone'}:4: $GENERATE is not accepted" in result.stderr
    assert "Traceback" not in result.stderr
