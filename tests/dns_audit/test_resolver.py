"""The live resolver against NSD: one query per (name, type) across domains and concurrent tasks; zone files."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from dns_audit.audit import AuditOptions, DomainTarget, run_audit
from dns_audit.errors import ZoneFileError
from dns_audit.resolver import LiveResolver, parse_nameserver
from dns_audit.spf import check_host
from dns_audit.zonefile import ZoneResolver
from tests.dns_audit import zones as z
from tests.support.nsd import NsdServer


def test_domains_sharing_includes_ask_each_name_once(nsd: NsdServer) -> None:
    resolver = LiveResolver([parse_nameserver(nsd.address)], timeout=1, retries=1)
    domains = ["clean.test", "listed.test", "ptr.test", "dkim-short.test", "dmarc-none.test"]
    options = AuditOptions(tls=None, ip_zones=(), domain_zones=(), concurrency=5)
    run_audit(resolver, [DomainTarget(d, (z.SELECTOR,)) for d in domains], options)
    # every domain includes _spf.shared.test and points its MX at mx.clean.test: asked once each
    assert resolver.queries_sent == resolver.distinct_names
    assert resolver.distinct_names < 9 * len(domains)


def test_concurrent_callers_share_one_query(nsd: NsdServer) -> None:
    resolver = LiveResolver([parse_nameserver(nsd.address)], timeout=1, retries=1)

    async def many() -> set[str]:
        answers = await asyncio.gather(*(resolver.query("clean.test", "TXT") for _ in range(50)))
        return {a.status for a in answers}

    assert asyncio.run(many()) == {"ok"}
    assert asyncio.run(many()) == {"ok"}  # a second event loop reuses the cached answer
    assert resolver.queries_sent == 1
    assert resolver.distinct_names == 1


def test_check_host_follows_includes_and_ends_in_the_right_result(nsd: NsdServer) -> None:
    resolver = LiveResolver([parse_nameserver(nsd.address)], timeout=1, retries=1)

    async def results() -> list[str]:
        return [await check_host(resolver, "127.0.0.10", "clean.test"),
                await check_host(resolver, "192.0.2.7", "clean.test"),  # via include:_spf.shared.test
                await check_host(resolver, "198.51.100.1", "clean.test"),
                await check_host(resolver, "198.51.100.1", "spf-lookups.test"),  # matches the 1st include
                await check_host(resolver, "203.0.113.5", "spf-lookups.test"),  # needs the 11th: over the limit
                await check_host(resolver, "127.0.0.10", "spf-missing.test")]

    assert asyncio.run(results()) == ["pass", "pass", "fail", "pass", "permerror", "none"]


def test_zone_file_records_keep_their_line(tmp_path: Path) -> None:
    (tmp_path / "example.test.zone").write_text(
        "$TTL 300\n@ IN SOA ns1 host 1 2 3 4 5\n@ IN NS ns1\n\n; the policy\n_dmarc IN TXT \"v=DMARC1; p=none\"\n")
    resolver = ZoneResolver(tmp_path)
    answer = asyncio.run(resolver.query("_dmarc.example.test", "TXT"))
    [record] = answer.records
    assert record.text == "v=DMARC1; p=none"
    assert record.location is not None and (record.location.file, record.location.line) == (
        str(tmp_path / "example.test.zone"), 6)
    assert asyncio.run(resolver.query("nothere.example.test", "TXT")).status == "nxdomain"
    assert asyncio.run(resolver.query("example.org", "TXT")).status == "unknown"


def test_zone_dir_without_zone_files_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ZoneFileError, match="no zone files"):
        ZoneResolver(tmp_path)
