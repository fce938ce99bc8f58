"""Fixture zones for NSD: a clean domain, one zone per failure mode, a reverse zone and a DNSBL zone.

Sending IPs and MX hosts live on 127.0.0.x so that forward/reverse DNS and SMTP all stay on loopback.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from dataclasses import dataclass

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

CLEAN_IP = "127.0.0.10"
NO_PTR_IP = "127.0.0.11"
MISMATCH_PTR_IP = "127.0.0.12"
GENERIC_PTR_IP = "127.0.0.13"
LISTED_IP = "127.0.0.14"
REFUSING_IP = "127.0.0.15"  # the DNSBL answers 127.255.255.254 for it
FAULTY_IP = "127.0.0.16"  # its PTR and DNSBL lookups fail through the fault proxy
MX_VALID, MX_EXPIRED, MX_WRONG_NAME, MX_TLS10, MX_NO_STARTTLS, MX_EXPIRING, MX_DOWN = (
    f"127.0.0.{n}" for n in range(21, 28))
MX_HOSTILE = "127.0.0.28"  # answers STARTTLS with a line over 64 KiB
MX_WEAK_KEY = "127.0.0.29"  # a valid chain to an RSA-1024 leaf: fails the default security level
DEEP_INCLUDES = 500
DNSBL_ZONE = "bl.test"
SELECTOR = "s1"


@dataclass(frozen=True)
class Keys:
    """DKIM keys: the clean 2048-bit private key (to sign test messages) and public TXT values."""

    private_pem: bytes
    p_2048: str
    p_1024: str
    p_512: str
    p_1023: str
    p_768: str


def _p(public_key: rsa.RSAPublicKey) -> str:
    der = public_key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return base64.b64encode(der).decode()


def make_keys() -> Keys:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    short = rsa.generate_private_key(public_exponent=65537, key_size=1024)
    # cryptography refuses to generate < 1024 bits; a 512-bit public key only needs a 512-bit odd modulus.
    weak = rsa.RSAPublicNumbers(65537, (1 << 511) | 0x1F3B).public_key()
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                            serialization.NoEncryption())
    # the thresholds: 1023 bits is under the 1024 minimum (weak), 768 is far under it
    just_under = rsa.RSAPublicNumbers(65537, (1 << 1022) | 0x2D5F).public_key()
    very_weak = rsa.RSAPublicNumbers(65537, (1 << 767) | 0x1A2B).public_key()
    return Keys(pem, _p(key.public_key()), _p(short.public_key()), _p(weak), _p(just_under), _p(very_weak))


def txt(value: str) -> str:
    """A TXT rdata in zone-file form, split into 255-byte strings."""
    chunks = [value[i:i + 255] for i in range(0, len(value), 255)] or [""]
    return " ".join('"' + c.replace("\\", "\\\\").replace('"', '\\"') + '"' for c in chunks)


def zone(origin: str, records: list[str]) -> str:
    head = [f"$ORIGIN {origin}.", "$TTL 300",
            f"@ IN SOA ns1.{origin}. hostmaster.{origin}. 1 3600 600 86400 300",
            f"@ IN NS ns1.{origin}.", "ns1 IN A 127.0.0.1"]
    return "\n".join(head + records) + "\n"


def mail_records(keys: Keys, **overrides: str | None) -> list[str]:
    """The records of a domain that passes everything; override one (None removes it) to make a failure mode."""
    base: dict[str, str | None] = {
        "spf": f"@ IN TXT {txt('v=spf1 ip4:127.0.0.0/24 include:_spf.shared.test -all')}",
        "mx": "@ IN MX 10 mx.clean.test.",
        "dkim": f"{SELECTOR}._domainkey IN TXT {txt(f'v=DKIM1; k=rsa; p={keys.p_2048}')}",
        "dmarc": f"_dmarc IN TXT {txt('v=DMARC1; p=reject; rua=mailto:dmarc@reports.shared.test')}",
        "mta_sts": f"_mta-sts IN TXT {txt('v=STSv1; id=20261130')}",
        "tlsrpt": f"_smtp._tls IN TXT {txt('v=TLSRPTv1; rua=mailto:tls@clean.test')}",
    }
    extra = overrides.pop("extra", None)
    base.update(overrides)
    return [r for r in base.values() if r] + ([extra] if extra else [])


def fixture_zones(keys: Keys) -> dict[str, str]:
    """{origin: zone text} for every fixture domain."""
    def dkim(value: str) -> str:
        return f"{SELECTOR}._domainkey IN TXT {txt(value)}"

    includes = " ".join(f"include:_spf{i}.shared.test" for i in range(1, 12))
    long_spf = "v=spf1 " + " ".join(f"ip4:10.0.{i}.0/24" for i in range(40)) + " ip4:127.0.0.0/24 -all"
    mx_host = "mx IN A {}"
    void_spf = "v=spf1 a:nx1.spf-void.test a:nx2.spf-void.test a:nx3.spf-void.test ip4:127.0.0.0/24 -all"
    zones = {
        "clean.test": zone("clean.test", [*mail_records(keys), mx_host.format(MX_VALID), f"mail IN A {CLEAN_IP}",
                                          f"mail14 IN A {LISTED_IP}", f"mail15 IN A {REFUSING_IP}"]),
        "shared.test": zone("shared.test", [
            f"_spf IN TXT {txt('v=spf1 ip4:192.0.2.0/24 -all')}",
            *(f"_spf{i} IN TXT {txt('v=spf1 ip4:198.51.100.0/24 -all')}" for i in range(1, 12)),
            f"bounce IN TXT {txt('v=spf1 ip4:127.0.0.0/24 -all')}",
            "reports IN MX 10 mx.clean.test.",
            # reports.shared.test accepts DMARC reports for every .test domain (RFC 7489 §7.1)
            f"*.test._report._dmarc.reports IN TXT {txt('v=DMARC1')}",
        ]),
        "0.0.127.in-addr.arpa": zone("0.0.127.in-addr.arpa", [
            "10 IN PTR mail.clean.test.",
            "12 IN PTR mismatch.ptr.test.",
            "13 IN PTR ip-127-0-0-13.ptr.test.",
            "14 IN PTR mail14.clean.test.",
            "15 IN PTR mail15.clean.test.",
        ]),
        "ptr.test": zone("ptr.test", [*mail_records(keys), "mismatch IN A 127.0.0.99",
                                      f"ip-127-0-0-13 IN A {GENERIC_PTR_IP}"]),
        DNSBL_ZONE: zone(DNSBL_ZONE, [
            f"{'.'.join(reversed(LISTED_IP.split('.')))} IN A 127.0.0.2",
            f"{'.'.join(reversed(LISTED_IP.split('.')))} IN TXT \"listed for testing\"",
            f"{'.'.join(reversed(REFUSING_IP.split('.')))} IN A 127.255.255.254",
            "listed.test IN A 127.0.1.2",
        ]),
        "listed.test": zone("listed.test", mail_records(keys)),
        "spf-missing.test": zone("spf-missing.test", mail_records(keys, spf=None)),
        "spf-multiple.test": zone("spf-multiple.test", mail_records(
            keys, extra=f"@ IN TXT {txt('v=spf1 ip4:127.0.0.0/24 ~all')}")),
        "spf-syntax.test": zone("spf-syntax.test", mail_records(
            keys, spf=f"@ IN TXT {txt('v=spf1 ip4:999.1.1.1 -all')}")),
        "spf-lookups.test": zone("spf-lookups.test", mail_records(
            keys, spf=f"@ IN TXT {txt(f'v=spf1 ip4:127.0.0.0/24 {includes} -all')}")),
        "spf-void.test": zone("spf-void.test", mail_records(
            keys, spf=f"@ IN TXT {txt(void_spf)}")),
        "spf-include.test": zone("spf-include.test", mail_records(
            keys, spf=f"@ IN TXT {txt('v=spf1 ip4:127.0.0.0/24 include:nothere.shared.test -all')}")),
        "spf-plusall.test": zone("spf-plusall.test", mail_records(
            keys, spf=f"@ IN TXT {txt('v=spf1 ip4:127.0.0.0/24 +all')}")),
        "spf-noall.test": zone("spf-noall.test", mail_records(keys, spf=f"@ IN TXT {txt('v=spf1 ip4:127.0.0.0/24')}")),
        "spf-ptr.test": zone("spf-ptr.test", mail_records(
            keys, spf=f"@ IN TXT {txt('v=spf1 ptr ip4:127.0.0.0/24 -all')}")),
        "spf-long.test": zone("spf-long.test", mail_records(keys, spf=f"@ IN TXT {txt(long_spf)}")),
        "spf-ip.test": zone("spf-ip.test", mail_records(keys, spf=f"@ IN TXT {txt('v=spf1 ip4:192.0.2.1 -all')}")),
        "dkim-missing.test": zone("dkim-missing.test", mail_records(keys, dkim=None)),
        "dkim-revoked.test": zone("dkim-revoked.test", mail_records(keys, dkim=dkim("v=DKIM1; k=rsa; p="))),
        "dkim-syntax.test": zone("dkim-syntax.test", mail_records(keys, dkim=dkim("v=DKIM1; k=rsa; p=!!not-base64!!"))),
        "dkim-weak.test": zone("dkim-weak.test", mail_records(keys, dkim=dkim(f"v=DKIM1; k=rsa; p={keys.p_512}"))),
        "dkim-short.test": zone("dkim-short.test", mail_records(keys, dkim=dkim(f"v=DKIM1; k=rsa; p={keys.p_1024}"))),
        "dkim-testing.test": zone("dkim-testing.test", mail_records(
            keys, dkim=dkim(f"v=DKIM1; k=rsa; t=y; p={keys.p_2048}"))),
        "dmarc-missing.test": zone("dmarc-missing.test", mail_records(keys, dmarc=None)),
        "dmarc-multiple.test": zone("dmarc-multiple.test", mail_records(
            keys, extra=f"_dmarc IN TXT {txt('v=DMARC1; p=none; rua=mailto:d@dmarc-multiple.test')}")),
        "dmarc-syntax.test": zone("dmarc-syntax.test", mail_records(
            keys, dmarc=f"_dmarc IN TXT {txt('v=DMARC1; p=maybe')}")),
        "dmarc-none.test": zone("dmarc-none.test", mail_records(
            keys, dmarc=f"_dmarc IN TXT {txt('v=DMARC1; p=none; rua=mailto:d@dmarc-none.test')}")),
        "dmarc-norua.test": zone("dmarc-norua.test", mail_records(
            keys, dmarc=f"_dmarc IN TXT {txt('v=DMARC1; p=reject')}")),
        "dmarc-external.test": zone("dmarc-external.test", mail_records(
            keys, dmarc=f"_dmarc IN TXT {txt('v=DMARC1; p=reject; rua=mailto:d@elsewhere.shared.test')}")),
        "dmarc-authorized.test": zone("dmarc-authorized.test", mail_records(
            keys, dmarc=f"_dmarc IN TXT {txt('v=DMARC1; p=reject; rua=mailto:d@reports.shared.test')}")),
        # the policy lives only at the organizational domain; sub.dmarc-org.test must find it there
        "dmarc-org.test": zone("dmarc-org.test", [*mail_records(keys), *(
            r.replace("@ IN", "sub IN").replace(f"{SELECTOR}._domainkey IN", f"{SELECTOR}._domainkey.sub IN")
            .replace("_mta-sts IN", "_mta-sts.sub IN").replace("_smtp._tls IN", "_smtp._tls.sub IN")
            for r in mail_records(keys, dmarc=None))]),
        "alignment-none.test": zone("alignment-none.test", mail_records(keys)),
        "mx-missing.test": zone("mx-missing.test", mail_records(keys, mx=None)),
        "mx-null.test": zone("mx-null.test", mail_records(keys, mx="@ IN MX 0 .")),
        "mx-cname.test": zone("mx-cname.test", mail_records(
            keys, mx="@ IN MX 10 mx.mx-cname.test.", extra="mx IN CNAME mx.clean.test.")),
        "tls-expired.test": zone("tls-expired.test", mail_records(
            keys, mx="@ IN MX 10 mx", extra=mx_host.format(MX_EXPIRED))),
        "tls-wrongname.test": zone("tls-wrongname.test", mail_records(
            keys, mx="@ IN MX 10 mx", extra=mx_host.format(MX_WRONG_NAME))),
        "tls-old.test": zone("tls-old.test", mail_records(keys, mx="@ IN MX 10 mx", extra=mx_host.format(MX_TLS10))),
        "tls-nostarttls.test": zone("tls-nostarttls.test", mail_records(
            keys, mx="@ IN MX 10 mx", extra=mx_host.format(MX_NO_STARTTLS))),
        "tls-expiring.test": zone("tls-expiring.test", mail_records(
            keys, mx="@ IN MX 10 mx", extra=mx_host.format(MX_EXPIRING))),
        "tls-down.test": zone("tls-down.test", mail_records(keys, mx="@ IN MX 10 mx", extra=mx_host.format(MX_DOWN))),
        "mta-sts-missing.test": zone("mta-sts-missing.test", mail_records(keys, mta_sts=None)),
        "mta-sts-invalid.test": zone("mta-sts-invalid.test", mail_records(
            keys, mta_sts=f"_mta-sts IN TXT {txt('v=STSv1; id=not valid!')}")),
        "tlsrpt-missing.test": zone("tlsrpt-missing.test", mail_records(keys, tlsrpt=None)),
        "tlsrpt-invalid.test": zone("tlsrpt-invalid.test", mail_records(
            keys, tlsrpt=f"_smtp._tls IN TXT {txt('v=TLSRPTv1; rua=ftp://example.test')}")),
        "flaky.test": zone("flaky.test", mail_records(keys)),
        "silent.test": zone("silent.test", mail_records(keys)),
        "garbage.test": zone("garbage.test", mail_records(
            keys, spf='@ IN TXT "v=spf1 \\000\\255\\254 ip4:127.0.0.0/24 ~~all %{zz}"',
            dmarc='_dmarc IN TXT "v=DMARC1;;; p=\\255\\000 ==="')),
        # ~62 KB of SPF: only fits over TCP; must end in a finding, not a hang or a traceback
        "big.test": zone("big.test", mail_records(
            keys, spf=f"@ IN TXT {txt('v=spf1 ' + 'ip4:127.0.0.1 ' * 4300 + '-all')}")),
        "xn--bcher-kva.test": zone("xn--bcher-kva.test", mail_records(keys)),
        **threshold_zones(keys, dkim),
        **hostile_zones(keys),
    }
    return zones


def threshold_zones(keys: Keys, dkim: Callable[[str], str]) -> dict[str, str]:
    """Records exactly at each limit and one past it: 10/11 SPF lookups, 2/3 void lookups, 1023/1024/768 bits."""
    def spf(text: str) -> str:
        return f"@ IN TXT {txt(text)}"

    ten = " ".join(f"include:_spf{i}.shared.test" for i in range(1, 11))
    return {
        "spf-ten.test": zone("spf-ten.test", mail_records(keys, spf=spf(f"v=spf1 ip4:127.0.0.0/24 {ten} -all"))),
        "spf-void2.test": zone("spf-void2.test", mail_records(keys, spf=spf(
            "v=spf1 a:nx1.spf-void2.test a:nx2.spf-void2.test ip4:127.0.0.0/24 -all"))),
        "dkim-1024.test": zone("dkim-1024.test", mail_records(keys, dkim=dkim(f"v=DKIM1; k=rsa; p={keys.p_1024}"))),
        "dkim-1023.test": zone("dkim-1023.test", mail_records(keys, dkim=dkim(f"v=DKIM1; k=rsa; p={keys.p_1023}"))),
        "dkim-768.test": zone("dkim-768.test", mail_records(keys, dkim=dkim(f"v=DKIM1; k=rsa; p={keys.p_768}"))),
    }


def hostile_zones(keys: Keys) -> dict[str, str]:
    """What an attacker who controls a zone (or an MX) can serve: each must cost one finding, not the audit."""
    chain = [f"c{i} IN TXT {txt(f'v=spf1 include:c{i + 1}.spf-deep.test -all')}" for i in range(1, DEEP_INCLUDES)]
    many = [f"mx IN A 127.0.1.{i}" for i in range(1, 13)]  # nothing listens there: each probe is refused fast
    return {
        "spf-deep.test": zone("spf-deep.test", mail_records(
            keys, spf=f"@ IN TXT {txt('v=spf1 include:c1.spf-deep.test -all')}", extra="\n".join(chain))),
        "tls-hostile.test": zone("tls-hostile.test", mail_records(
            keys, mx="@ IN MX 10 mx", extra=f"mx IN A {MX_HOSTILE}")),
        "tls-weakkey.test": zone("tls-weakkey.test", mail_records(
            keys, mx="@ IN MX 10 mx", extra=f"mx IN A {MX_WEAK_KEY}")),
        "tls-many.test": zone("tls-many.test", mail_records(keys, mx="@ IN MX 10 mx", extra="\n".join(many))),
    }
