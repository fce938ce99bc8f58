"""Real servers for the DNS audit: NSD serving the fixture zones, aiosmtpd STARTTLS servers, a trustme CA."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import trustme

from dns_audit.audit import AuditOptions, DomainTarget, run_audit
from dns_audit.findings import DomainReport
from dns_audit.resolver import LiveResolver, parse_nameserver
from dns_audit.tls import TlsProbe
from tests.dns_audit import zones as z
from tests.dns_audit.certs import weak_leaf, weak_server_context
from tests.support.hostile_smtp import oversized_line_smtp
from tests.support.net import free_port_on, on_ci
from tests.support.nsd import NsdServer, nsd_available, nsd_server
from tests.support.smtp_tls import server_context, smtp_servers


def _need_nsd() -> None:
    if not nsd_available() and not on_ci():
        pytest.skip("needs the NSD authoritative server: apt-get install nsd")


@pytest.fixture(scope="session")
def dkim_keys() -> z.Keys:
    return z.make_keys()


@pytest.fixture(scope="session")
def nsd(tmp_path_factory: pytest.TempPathFactory, dkim_keys: z.Keys) -> Iterator[NsdServer]:
    _need_nsd()
    with nsd_server(tmp_path_factory.mktemp("nsd"), z.fixture_zones(dkim_keys)) as server:
        yield server


@dataclass(frozen=True)
class Mail:
    port: int
    ca_file: str


@pytest.fixture(scope="session")
def mail(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mail]:
    """STARTTLS servers on 127.0.0.21-26 (valid, expired, wrong name, TLS 1.0 only, no STARTTLS, expiring), a
    hostile one on .28 (a line over 64 KiB after STARTTLS) and an RSA-1024 certificate on .29."""
    ca = trustme.CA()
    now = dt.datetime.now(dt.UTC)
    ca_file = tmp_path_factory.mktemp("ca") / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    contexts = {
        z.MX_VALID: server_context(ca.issue_cert("mx.clean.test", "mx.mx-cname.test")),
        z.MX_EXPIRED: server_context(ca.issue_cert("mx.tls-expired.test", not_before=now - dt.timedelta(days=60),
                                                   not_after=now - dt.timedelta(days=1))),
        z.MX_WRONG_NAME: server_context(ca.issue_cert("other.example.test")),
        z.MX_TLS10: server_context(ca.issue_cert("mx.tls-old.test"), max_tls10=True),
        z.MX_NO_STARTTLS: None,
        z.MX_EXPIRING: server_context(ca.issue_cert("mx.tls-expiring.test", not_after=now + dt.timedelta(days=5))),
    }
    weak = weak_leaf(tmp_path_factory.mktemp("weak"), "mx.tls-weakkey.test")
    contexts[z.MX_WEAK_KEY] = weak_server_context(weak)
    ca_file.write_bytes(ca_file.read_bytes() + weak.ca_pem)  # both CAs are trusted: only the key size fails
    port = free_port_on([*contexts, z.MX_HOSTILE, z.MX_DOWN])  # MX_DOWN's port too: nothing may answer there
    with smtp_servers(port, contexts), oversized_line_smtp(z.MX_HOSTILE, port):
        yield Mail(port, str(ca_file))


Audit = Callable[..., DomainReport]


@pytest.fixture
def audit(nsd: NsdServer, mail: Mail) -> Audit:
    """Audit one domain against the fixture servers through the Python API; returns its report. The sending
    mode defaults to `direct` when IPs are given (every check on them applies), else `submission`."""

    def run(domain: str, *, ips: tuple[str, ...] = (), selectors: tuple[str, ...] = (z.SELECTOR,),
            envelope: str | None = None, nameserver: str | None = None, timeout: float = 1.0,
            dnsbl: tuple[str, ...] = (z.DNSBL_ZONE,), profile: str = "gmail-bulk",
            deadline: float = 30, mode: str | None = None, spf_includes: tuple[str, ...] = (),
            dmarc_floor: str | None = None) -> DomainReport:
        resolver = LiveResolver([parse_nameserver(nameserver or nsd.address)], timeout=timeout, retries=1)
        options = AuditOptions(profile=profile, ip_zones=dnsbl, domain_zones=dnsbl,
                               tls=TlsProbe(port=mail.port, ca_file=mail.ca_file, timeout=5), deadline=deadline)
        target = DomainTarget(domain, selectors, ips, envelope, mode or ("direct" if ips else "submission"),
                              spf_includes, dmarc_floor)
        [report] = run_audit(resolver, [target], options)
        return report

    return run


def codes(report: DomainReport) -> set[str]:
    return {f.code for f in report.findings}


@pytest.fixture
def sendhost_dns(nsd: NsdServer, mail: Mail) -> Callable[..., object]:
    """Run `sendhost dns audit ...` in a subprocess against the fixture servers."""
    from tests.conftest import run_cli

    def run(*args: str, nameserver: str | None = None, env: dict[str, str] | None = None) -> object:
        return run_cli("dns", "audit", "--nameserver", nameserver or nsd.address, "--smtp-port", str(mail.port),
                       "--ca-file", mail.ca_file, "--timeout", "1", "--retries", "1", *args, env=env)

    return run


def zone_dir_from(nsd: NsdServer, tmp: Path, origins: list[str]) -> Path:
    """Copy some fixture zone files into a directory for offline (--zone-dir) audits."""
    target = tmp / "zones"
    target.mkdir()
    for origin in origins:
        (target / f"{origin}.zone").write_text((nsd.directory / f"{origin}.zone").read_text())
    return target
