"""STARTTLS on each MX host: offered, certificate valid for the MX name and not (nearly) expired, TLS >= 1.2.

Every network step has a timeout; the connector (address, port, CA file, clock) is injected by the caller.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import ssl
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

from cryptography import x509

from dns_audit.findings import Finding, finding

EXPIRING_DAYS = 14
X509_V_ERR_CERT_HAS_EXPIRED = 10
OLD_PROTOCOLS = ("TLSv1", "TLSv1.1", "SSLv3")
MAX_REPLY_LINE = 4096  # RFC 5321 §4.5.3.1.5 allows 512 octets; a longer line is hostile or broken
MAX_REPLY_LINES = 100
MAX_PROBES = 8  # MX host x address pairs probed per domain: a hostile MX set cannot make the audit dial forever


@dataclass(frozen=True)
class TlsProbe:
    """How to reach MX hosts: SMTP port, trust anchors, timeout, and the clock for expiry checks."""

    port: int = 25
    ca_file: str | None = None
    timeout: float = 10.0
    helo_name: str = "sendhost-audit.invalid"
    now: Callable[[], dt.datetime] = field(default=lambda: dt.datetime.now(dt.UTC))


class _SmtpError(Exception):
    pass


class _HandshakeFailed(Exception):
    """The TLS handshake after an accepted STARTTLS failed other than on the certificate (protocol, reset)."""


async def _reply(reader: asyncio.StreamReader) -> tuple[int, list[str]]:
    lines: list[str] = []
    while True:
        if len(lines) >= MAX_REPLY_LINES:
            raise _SmtpError(f"reply of more than {MAX_REPLY_LINES} lines")
        try:
            raw = await reader.readline()
        except ValueError:  # asyncio's "chunk exceeds the limit": a line longer than MAX_REPLY_LINE
            raise _SmtpError(f"reply line longer than {MAX_REPLY_LINE} bytes") from None
        line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
        if len(line) < 3 or not line[:3].isdigit():
            raise _SmtpError(f"not an SMTP reply: {line[:80]!r}")
        lines.append(line[4:])
        if line[3:4] != "-":
            return int(line[:3]), lines


def _context(probe: TlsProbe, verify: bool) -> ssl.SSLContext:
    """The verifying context keeps the default security level (a 1024-bit RSA certificate or an old protocol
    fails it). The weakened one only detects which protocol an old server speaks; it judges no certificate."""
    if verify:
        return ssl.create_default_context(cafile=probe.ca_file)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        context.minimum_version = ssl.TLSVersion.TLSv1
    context.set_ciphers("DEFAULT:@SECLEVEL=0")
    return context


async def _starttls(host: str, address: str, probe: TlsProbe, verify: bool) -> tuple[str | None, bytes | None]:
    """Connect, EHLO, STARTTLS, handshake. Returns (protocol, der certificate); (None, None) without STARTTLS."""
    reader, writer = await asyncio.open_connection(address, probe.port, limit=MAX_REPLY_LINE)
    try:
        code, _ = await _reply(reader)
        if code != 220:
            raise _SmtpError(f"greeting {code}")
        writer.write(f"EHLO {probe.helo_name}\r\n".encode())
        code, extensions = await _reply(reader)
        if code != 250 or not any(e.upper().startswith("STARTTLS") for e in extensions):
            return None, None
        writer.write(b"STARTTLS\r\n")
        code, lines = await _reply(reader)
        if code != 220:
            raise _SmtpError(f"STARTTLS answered {code} {' '.join(lines)[:80]}")
        try:
            await writer.start_tls(_context(probe, verify), server_hostname=host)
        except ssl.SSLCertVerificationError:
            raise
        except (ssl.SSLError, OSError, EOFError) as exc:
            raise _HandshakeFailed(f"{type(exc).__name__}: {exc}") from None
        ssl_object = writer.get_extra_info("ssl_object")
        assert isinstance(ssl_object, ssl.SSLObject)
        writer.write(b"QUIT\r\n")
        return ssl_object.version(), ssl_object.getpeercert(binary_form=True)
    finally:
        writer.close()
        with contextlib.suppress(OSError, ssl.SSLError, TimeoutError, _SmtpError):
            await asyncio.wait_for(writer.wait_closed(), 1.0)


async def audit_mx_tls(host: str, address: str, probe: TlsProbe) -> list[Finding]:
    """Findings for one MX host at one address."""
    target = f"{host} ({address}:{probe.port})"
    try:
        protocol, der = await asyncio.wait_for(_starttls(host, address, probe, verify=True), probe.timeout)
    except ssl.SSLCertVerificationError as exc:
        code = "tls.cert_expired" if exc.verify_code == X509_V_ERR_CERT_HAS_EXPIRED else "tls.cert_invalid"
        found = [finding(code, f"certificate of {target} fails verification: {exc.verify_message}", str(exc)[:300],
                         subject=target)]
        return found + await _protocol_only(host, address, probe)
    except (ssl.SSLError, _HandshakeFailed) as exc:
        old = await _protocol_only(host, address, probe)
        return old or [finding("tls.cert_invalid", f"{target}: TLS handshake failed", str(exc)[:300],
                               subject=target)]
    except (TimeoutError, OSError, _SmtpError, EOFError) as exc:
        return [finding("tls.lookup_failed", f"could not talk SMTP to {target}: {type(exc).__name__} {exc}",
                        subject=target)]
    if protocol is None:
        return [finding("tls.no_starttls", f"{target} does not offer STARTTLS", "EHLO reply without STARTTLS",
                        subject=target)]
    found = []
    if protocol in OLD_PROTOCOLS:
        found.append(finding("tls.old_protocol", f"{target} negotiated {protocol}", f"negotiated {protocol}",
                             subject=target))
    if der is not None:
        not_after = x509.load_der_x509_certificate(der).not_valid_after_utc
        left = not_after - probe.now()
        if left < dt.timedelta(days=EXPIRING_DAYS):
            found.append(finding("tls.cert_expiring", f"certificate of {target} expires in {left.days} days",
                                 f"notAfter {not_after.isoformat()}", subject=target))
    return found


async def _protocol_only(host: str, address: str, probe: TlsProbe) -> list[Finding]:
    """After a certificate failure, still report an old protocol (an unverified handshake tells us that)."""
    try:
        protocol, _ = await asyncio.wait_for(_starttls(host, address, probe, verify=False), probe.timeout)
    except (ssl.SSLError, TimeoutError, OSError, _SmtpError, EOFError, _HandshakeFailed):
        return []
    if protocol in OLD_PROTOCOLS:
        return [finding("tls.old_protocol", f"{host} ({address}:{probe.port}) negotiated {protocol}",
                        f"negotiated {protocol}", subject=f"{host} ({address}:{probe.port})")]
    return []
