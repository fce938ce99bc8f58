"""Benchmark `sendhost dns audit` against checkdmarc (its Python API) on the same nameserver, same run.

200 generated domains whose SPF records include trees shared across domains (8 providers, each two levels deep)
are served by NSD inside a network namespace behind a veth pair, with ~20 ms added to every DNS round trip:
`tc qdisc ... netem delay 20ms` on the namespace side, or, when the kernel has no netem, a userspace relay that
holds every answer back 20 ms (bench/dns_delay.py; it also counts both tools' queries).

Prints domains/s for both, the ratio (target >= 20x), and DNS queries sent per domain against the distinct
(name, type) lookups needed (target <= 1.1: the shared cache works). Needs root, iproute2 and nsd.
Run: sudo .venv/bin/python bench/audit.py [--domains 200] [--checkdmarc-domains 20]
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.dns_delay import DelayRelay
from dns_audit.audit import AuditOptions, DomainTarget, run_audit
from dns_audit.resolver import LiveResolver
from tests.support.nsd import nsd_server

PROVIDERS = 8
SUBNET = "10.231.{n}"


def _zone(origin: str, records: list[str]) -> str:
    head = [f"$ORIGIN {origin}.", "$TTL 3600", f"@ IN SOA ns1.{origin}. hostmaster.{origin}. 1 3600 600 86400 300",
            f"@ IN NS ns1.{origin}.", "ns1 IN A 192.0.2.53"]
    return "\n".join(head + records) + "\n"


def _dkim_public_key() -> str:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048).public_key()
    der = key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return base64.b64encode(der).decode()


def generate_zones(domains: int) -> dict[str, str]:
    """Provider zones with two-level SPF include trees, and `domains` sender zones including two providers each."""
    zones = {}
    p_key = _dkim_public_key()
    dkim = " ".join(f'"{c}"' for c in [f"v=DKIM1; k=rsa; p={p_key}"[i:i + 255] for i in range(0, 420, 255)])
    for p in range(PROVIDERS):
        zones[f"p{p}.bench"] = _zone(f"p{p}.bench", [
            f'_spf IN TXT "v=spf1 include:_a.p{p}.bench include:_b.p{p}.bench ~all"',
            f'_a IN TXT "v=spf1 ip4:198.18.{p}.0/25 ip4:198.19.{p}.0/25 ~all"',
            f'_b IN TXT "v=spf1 ip4:198.18.{p}.128/25 ip4:198.19.{p}.128/25 ~all"',
            f"mx IN A 192.0.2.{10 + p}",
            # reports.p0.bench accepts DMARC reports for every bench domain (RFC 7489 §7.1)
            '*.bench._report._dmarc.reports IN TXT "v=DMARC1"',
        ])
    for d in range(domains):
        first, second = d % PROVIDERS, (d * 3 + 1) % PROVIDERS
        if second == first:
            second = (first + 1) % PROVIDERS
        zones[f"d{d:03}.bench"] = _zone(f"d{d:03}.bench", [
            f'@ IN TXT "v=spf1 ip4:203.0.113.{d % 250} include:_spf.p{first}.bench include:_spf.p{second}.bench -all"',
            f'@ IN TXT "site-verification={d:08x}"',
            f"@ IN MX 10 mx.p{first}.bench.",
            '_dmarc IN TXT "v=DMARC1; p=quarantine; rua=mailto:dmarc@reports.p0.bench"',
            f"s1._domainkey IN TXT {dkim}",
            '_smtp._tls IN TXT "v=TLSRPTv1; rua=mailto:tls@reports.p0.bench"',
        ])
    return zones


def _run(*command: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, capture_output=True, text=True, check=check)


@contextlib.contextmanager
def namespace(delay_ms: int) -> Iterator[tuple[str, str, bool]]:
    """A netns with a veth to the host; yields (netns name, address inside, netem applied)."""
    name, tag = f"shbench{os.getpid()}", os.getpid() % 200 + 20
    host_if, ns_if = f"shb{os.getpid() % 100000}h", f"shb{os.getpid() % 100000}n"
    host_ip, ns_ip = f"10.231.{tag}.1", f"10.231.{tag}.2"
    _run("ip", "netns", "add", name)
    try:
        _run("ip", "link", "add", host_if, "type", "veth", "peer", "name", ns_if)
        _run("ip", "link", "set", ns_if, "netns", name)
        _run("ip", "addr", "add", f"{host_ip}/24", "dev", host_if)
        _run("ip", "link", "set", host_if, "up")
        _run("ip", "netns", "exec", name, "ip", "addr", "add", f"{ns_ip}/24", "dev", ns_if)
        _run("ip", "netns", "exec", name, "ip", "link", "set", ns_if, "up")
        _run("ip", "netns", "exec", name, "ip", "link", "set", "lo", "up")
        netem = _run("ip", "netns", "exec", name, "tc", "qdisc", "add", "dev", ns_if, "root", "netem", "delay",
                     f"{delay_ms}ms", check=False)
        yield name, ns_ip, netem.returncode == 0
    finally:
        _run("ip", "netns", "del", name, check=False)  # takes the veth pair with it
        _run("ip", "link", "del", host_if, check=False)


def bench_sendhost(server: tuple[str, int], domains: list[str], concurrency: int) -> tuple[float, LiveResolver, int]:
    resolver = LiveResolver([server], timeout=2.0, retries=2)
    targets = [DomainTarget(d, ("s1",)) for d in domains]
    options = AuditOptions(tls=None, ip_zones=(), domain_zones=(), concurrency=concurrency)
    started = time.perf_counter()
    reports = run_audit(resolver, targets, options)
    elapsed = time.perf_counter() - started
    return elapsed, resolver, sum(len(r.findings) for r in reports)


def bench_checkdmarc(server: tuple[str, int], domains: list[str]) -> tuple[float, int] | None:
    try:
        import checkdmarc
        import dns.nameserver
    except ImportError:
        print("checkdmarc is not installed (pip install checkdmarc): no baseline measured")
        return None
    logging.getLogger("checkdmarc").setLevel(logging.CRITICAL)  # its per-domain DNSSEC warnings are noise here
    nameserver = dns.nameserver.Do53Nameserver(server[0], server[1])
    started = time.perf_counter()
    results = checkdmarc.check_domains(domains, nameservers=[nameserver], timeout=2.0)
    elapsed = time.perf_counter() - started
    results = results if isinstance(results, list) else [results]
    valid_spf = sum(1 for r in results if r["spf"].get("valid"))
    return elapsed, valid_spf


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--domains", type=int, default=200)
    parser.add_argument("--checkdmarc-domains", type=int, default=20,
                        help="checkdmarc audits this many of them (it is slow; the rate is what is compared)")
    parser.add_argument("--delay-ms", type=int, default=20)
    parser.add_argument("--concurrency", type=int, default=50)
    args = parser.parse_args()
    if os.geteuid() != 0 or not shutil.which("ip"):
        print("needs root and iproute2 (network namespace, veth, tc)")
        return 2
    zones = generate_zones(args.domains)
    domains = [f"d{d:03}.bench" for d in range(args.domains)]
    with tempfile.TemporaryDirectory() as tmp, namespace(args.delay_ms) as (netns, ns_ip, netem), \
            nsd_server(Path(tmp), zones, host=ns_ip, port=53, prefix=("ip", "netns", "exec", netns)):
        relay_cm: contextlib.AbstractContextManager[DelayRelay | None]
        if netem:
            print(f"latency: tc netem delay {args.delay_ms}ms on the namespace's veth")
            relay_cm = contextlib.nullcontext()
        else:
            print(f"latency: no netem qdisc in this kernel; userspace relay adds {args.delay_ms} ms per answer "
                  "(NSD still in its own network namespace behind a veth)")
            relay_cm = DelayRelay((ns_ip, 53), args.delay_ms / 1000)
        with relay_cm as relay:
            server = relay.address if relay else (ns_ip, 53)
            before = relay.queries if relay else 0
            elapsed, resolver, findings = bench_sendhost(server, domains, args.concurrency)
            wire = (relay.queries - before) if relay else resolver.queries_sent
            rate = len(domains) / elapsed
            print(f"sendhost:   {len(domains)} domains in {elapsed:.2f}s = {rate:.1f} domains/s "
                  f"(SPF tree, DKIM, DMARC + report auth, MX, MTA-STS, TLS-RPT; {findings} findings)")
            print(f"  DNS queries sent: {wire} = {wire / len(domains):.2f}/domain; distinct lookups needed: "
                  f"{resolver.distinct_names} = {resolver.distinct_names / len(domains):.2f}/domain; "
                  f"ratio {wire / resolver.distinct_names:.3f} (target <= 1.1)")
            subset = domains[: args.checkdmarc_domains]
            before = relay.queries if relay else 0
            baseline = bench_checkdmarc(server, subset)
            if baseline is not None:
                base_elapsed, valid = baseline
                base_rate = len(subset) / base_elapsed
                queries = f", {(relay.queries - before) / len(subset):.1f} queries/domain" if relay else ""
                print(f"checkdmarc: {len(subset)} domains (a subset: it audits one after another) in "
                      f"{base_elapsed:.2f}s = {base_rate:.2f} domains/s ({valid} valid SPF{queries})")
                print(f"ratio: sendhost is {rate / base_rate:.1f}x checkdmarc's domains/s (target >= 20x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
