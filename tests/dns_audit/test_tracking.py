"""A campaign's tracking domain in the DNS audit (dns_audit.tracking): it resolves, its HTTPS certificate verifies
for the name, it is on no URI blocklist. DNS from the in-memory resolver (a fake at the resolver interface), HTTPS
from a real TLS server on loopback with a certificate of a test CA."""

from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from dns_audit.findings import CATALOG, CheckSkipped, Finding
from dns_audit.tls import TlsProbe
from dns_audit.tracking import audit_tracking
from tests.conftest import run_cli
from tests.dns_audit.certs import weak_leaf
from tests.dns_audit.memory_dns import FakeDns

DOMAIN = "t.example.test"
URI_LIST = "dbl.example.test"


def _codes(found: list[Finding]) -> list[str]:
    return [f.code for f in found]


def _served(tmp_path: Path, host: str, check: Callable[[int, str], Awaitable[list[Finding]]]) -> list[Finding]:
    """`check(port, ca_file)` while a TLS server with a certificate for `host` listens on 127.0.0.1."""
    leaf = weak_leaf(tmp_path, host, bits=2048)
    ca_file = tmp_path / "ca.pem"
    ca_file.write_bytes(leaf.ca_pem)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(str(leaf.cert_file), str(leaf.key_file))

    async def main() -> list[Finding]:
        async def greet(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            writer.close()

        server = await asyncio.start_server(greet, "127.0.0.1", 0, ssl=context)
        port = server.sockets[0].getsockname()[1]
        async with server:
            return await check(port, str(ca_file))

    return asyncio.run(main())


@pytest.mark.service
def test_a_tracking_domain_that_resolves_serves_its_own_name_and_is_listed_nowhere_is_clean(tmp_path: Path) -> None:
    dns = FakeDns({DOMAIN: {"A": ["127.0.0.1"]}})
    found = _served(tmp_path, DOMAIN, lambda port, ca: audit_tracking(
        dns, [DOMAIN], [URI_LIST], TlsProbe(ca_file=ca, timeout=5), port))
    assert found == []
    assert (f"{DOMAIN}.{URI_LIST}", "A") in dns.queries  # the URI blocklist was asked


@pytest.mark.service
def test_a_certificate_for_another_name_is_invalid(tmp_path: Path) -> None:
    dns = FakeDns({DOMAIN: {"A": ["127.0.0.1"]}})
    found = _served(tmp_path, "shared-tracker.example", lambda port, ca: audit_tracking(
        dns, [DOMAIN], [], TlsProbe(ca_file=ca, timeout=5), port))
    assert _codes(found) == ["tracking.tls_invalid"] and "127.0.0.1" in found[0].message


@pytest.mark.service
def test_no_https_there_is_unreachable(tmp_path: Path) -> None:
    async def closed_port(port: int, ca: str) -> list[Finding]:
        return await audit_tracking(FakeDns({DOMAIN: {"A": ["127.0.0.1"]}}), [DOMAIN], [],
                                    TlsProbe(ca_file=ca, timeout=5), 1)  # port 1: nothing listens

    assert _codes(_served(tmp_path, DOMAIN, closed_port)) == ["tracking.https_unreachable"]


def test_a_domain_without_an_address_or_on_a_uri_blocklist_is_an_error() -> None:
    dns = FakeDns({"other.example.test": {"A": ["192.0.2.1"]},
                   f"listed.example.test.{URI_LIST}": {"A": ["127.0.1.2"], "TXT": ["listed for phishing"]},
                   "listed.example.test": {"A": ["192.0.2.2"]}},
                  timeouts=["slow.example.test"])
    found = asyncio.run(audit_tracking(dns, [DOMAIN, "listed.example.test", "slow.example.test"], [URI_LIST], None))
    assert _codes(found) == ["tracking.unresolved", "tracking.listed", "tracking.lookup_failed"]
    assert "listed for phishing" in found[1].evidence
    assert all(CATALOG[f.code].severity == "error" for f in found)


def test_no_tracking_domain_skips_the_check() -> None:
    with pytest.raises(CheckSkipped, match="no campaign names a tracking domain"):
        asyncio.run(audit_tracking(FakeDns({}), [], [URI_LIST], None))


CAMPAIGN = """\
name: q1
group: sales
steps:
  - subject: "Hi"
    body: "See https://brand.test/pricing"
tracking: {tracking}
"""


def _zone_dir(tmp_path: Path) -> Path:
    zones = tmp_path / "zones"
    zones.mkdir()
    (zones / "brand.test.zone").write_text(
        "$ORIGIN brand.test.\n$TTL 300\n@ IN SOA ns1 hostmaster 1 3600 600 86400 300\n@ IN NS ns1\n"
        "ns1 IN A 127.0.0.1\n@ IN MX 10 mx\nmx IN A 127.0.0.1\nt IN A 127.0.0.1\n")
    return zones


def _campaign(tmp_path: Path, name: str, tracking: str) -> str:
    path = tmp_path / f"{name}.yml"
    path.write_text(CAMPAIGN.format(tracking=tracking))
    return str(path)


def test_dns_audit_checks_each_campaigns_tracking_domain_with_the_domain_it_is_under(tmp_path: Path) -> None:
    zones = _zone_dir(tmp_path)
    good = _campaign(tmp_path, "good", "{clicks: true, domain: t.brand.test}")
    result = run_cli("dns", "audit", "--zone-dir", str(zones), "--campaign", good, "--format", "json")
    (report,) = json.loads(result.stdout)["domains"]
    assert {"name": "tracking", "status": "pass", "note": ""} in report["checks"]
    gone = _campaign(tmp_path, "gone", "{clicks: true, domain: gone.brand.test}")
    result = run_cli("dns", "audit", "--zone-dir", str(zones), "--campaign", gone, "--format", "json")
    assert result.returncode == 1
    (report,) = json.loads(result.stdout)["domains"]
    assert [f["code"] for f in report["findings"] if f["code"].startswith("tracking.")] == ["tracking.unresolved"]
    # a campaign without tracking adds no check: the report is what it was
    plain = run_cli("dns", "audit", "--zone-dir", str(zones), "--campaign", _campaign(tmp_path, "plain", "{}"),
                    "--format", "json")
    assert "tracking" not in [c["name"] for c in json.loads(plain.stdout)["domains"][0]["checks"]]


def test_a_campaign_that_tracks_without_a_domain_is_refused_in_one_line(tmp_path: Path) -> None:
    bad = _campaign(tmp_path, "bad", "{clicks: true}")
    result = run_cli("dns", "audit", "--zone-dir", str(_zone_dir(tmp_path)), "--campaign", bad)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.strip() == (f"error: {bad}:6: tracking: tracking needs a domain of your own (domain: "
                                     "t.example.com, pointed at `sendhost sender web`): shared tracking hosts sit on "
                                     "URI blocklists")
