"""Each DNS limit tested at the limit and one past it (issue 17: mutations of `>` into `>=` must fail a test)."""

from __future__ import annotations

import asyncio

import pytest

from dns_audit.spf import audit_spf, check_host
from tests.dns_audit.conftest import Audit, codes
from tests.dns_audit.memory_dns import FakeDns


def test_spf_with_exactly_10_lookups_passes_the_audit(audit: Audit) -> None:
    assert codes(audit("spf-ten.test")) == set()


def test_spf_with_11_lookups_fails_the_audit(audit: Audit) -> None:
    assert codes(audit("spf-lookups.test")) == {"spf.lookup_limit"}


def test_exactly_2_void_lookups_pass_and_3_fail(audit: Audit) -> None:
    assert codes(audit("spf-void2.test")) == set()
    assert codes(audit("spf-void.test")) == {"spf.void_limit"}


@pytest.mark.parametrize(("domain", "expected"), [
    ("dkim-1024.test", {"dkim.short_key"}),  # the minimum: allowed, 2048 recommended
    ("dkim-1023.test", {"dkim.weak_key"}),  # one bit under: rejected by verifiers
    ("dkim-768.test", {"dkim.weak_key"}),
    ("clean.test", set()),  # 2048
])
def test_dkim_key_size_thresholds(audit: Audit, domain: str, expected: set[str]) -> None:
    assert codes(audit(domain)) == expected


def _includes(count: int) -> FakeDns:
    zone = {"example.test": {"TXT": ["v=spf1 " + " ".join(f"include:i{n}.example.test" for n in range(count))
                                     + " -all"]}}
    for n in range(count):
        # each include fails to match (-all would end it), so evaluation goes on to the next term
        zone[f"i{n}.example.test"] = {"TXT": ["v=spf1 ?ip4:198.51.100.1 -all"]}
    zone["example.test"]["TXT"] = [zone["example.test"]["TXT"][0].replace(" -all", " ip4:192.0.2.1 -all")]
    return FakeDns(zone)


def test_check_host_passes_at_10_lookups_and_permerrors_at_11() -> None:
    assert asyncio.run(check_host(_includes(10), "192.0.2.1", "example.test")) == "pass"
    assert asyncio.run(check_host(_includes(11), "192.0.2.1", "example.test")) == "permerror"


def _voids(count: int) -> FakeDns:
    terms = " ".join(f"a:nx{n}.example.test" for n in range(count))
    return FakeDns({"example.test": {"TXT": [f"v=spf1 {terms} ip4:192.0.2.1 -all"]}})


def test_check_host_allows_2_void_lookups_and_permerrors_at_3() -> None:
    assert asyncio.run(check_host(_voids(2), "192.0.2.1", "example.test")) == "pass"
    assert asyncio.run(check_host(_voids(3), "192.0.2.1", "example.test")) == "permerror"


def test_the_spf_walk_stops_at_the_void_limit_and_follows_nothing_after_it() -> None:
    """Past 2 void lookups a receiver has returned permerror: the audit reports that alone and follows nothing
    after it (here an include whose record uses `ptr`, then enough terms to pass 10 lookups)."""
    later = [f"a:host{n}.example.test" for n in range(8)]
    dns = FakeDns({
        "example.test": {"TXT": [" ".join(["v=spf1", *(f"a:nx{n}.example.test" for n in range(3)),
                                           "include:later.example.test", *later, "-all"])]},
        "later.example.test": {"TXT": ["v=spf1 ptr -all"]},
        **{f"host{n}.example.test": {"A": ["192.0.2.1"]} for n in range(8)},
    })
    assert {f.code for f in asyncio.run(audit_spf(dns, "example.test"))} == {"spf.void_limit"}
    assert not [name for name, _type in dns.queries if name.startswith(("later.", "host"))], dns.queries
