"""Real SMTP servers (aiosmtpd) with STARTTLS, each on its own loopback address, certificates from a trustme CA."""

from __future__ import annotations

import ssl
import warnings
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

from aiosmtpd.controller import Controller
from aiosmtpd.handlers import Sink


def server_context(cert: object, max_tls10: bool = False) -> ssl.SSLContext:
    """A server context from a trustme LeafCert; `max_tls10` makes a server that only speaks TLS 1.0."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    cert.configure_cert(context)  # type: ignore[attr-defined]
    if max_tls10:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            context.minimum_version = ssl.TLSVersion.TLSv1
            context.maximum_version = ssl.TLSVersion.TLSv1
        context.set_ciphers("DEFAULT:@SECLEVEL=0")
    return context


@contextmanager
def smtp_servers(port: int, contexts: dict[str, ssl.SSLContext | None]) -> Iterator[None]:
    """Start one aiosmtpd server per address ({ip: STARTTLS context or None for no STARTTLS}) on `port`."""
    with ExitStack() as stack:
        for address, context in contexts.items():
            controller = Controller(Sink(), hostname=address, port=port, tls_context=context,
                                    require_starttls=False, ready_timeout=10)
            controller.start()
            stack.callback(controller.stop)
        yield
