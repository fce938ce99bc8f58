"""The DNSBL screen of fresh addresses, against a real DNS server (NSD) serving a test blocklist zone."""

from __future__ import annotations

from pathlib import Path

import pytest

from dns_audit.resolver import LiveResolver
from ippool.screen import DnsblScreen
from tests.support.net import on_ci
from tests.support.nsd import nsd_available, nsd_server

ZONE = """\
$ORIGIN bl.test.
$TTL 60
@ IN SOA ns.bl.test. admin.bl.test. 1 3600 600 86400 60
@ IN NS ns.bl.test.
ns IN A 127.0.0.1
7.100.51.198 IN A 127.0.0.2
8.100.51.198 IN A 127.255.255.254
"""


@pytest.mark.service
def test_dnsbl_screen_rejects_listed_addresses_only(tmp_path: Path) -> None:
    if not nsd_available() and not on_ci():
        pytest.skip("install the nsd package to run the DNSBL screen against a real DNS server")
    with nsd_server(tmp_path / "nsd", {"bl.test": ZONE}) as server:
        screen = DnsblScreen(lambda: LiveResolver([(server.host, server.port)], timeout=1.0), ["bl.test"])
        assert screen("198.51.100.7") == "dnsbl:bl.test"  # listed
        assert screen("198.51.100.8") is None  # 127.255.255.x: the list refused to answer, not a listing
        assert screen("198.51.100.9") is None  # not listed (NXDOMAIN)
        assert screen("198.51.100.7") == "dnsbl:bl.test"  # a second screening of the same address works too
