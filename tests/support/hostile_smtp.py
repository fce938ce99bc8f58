"""An SMTP server that turns hostile once STARTTLS is asked for: it answers with one line far over 64 KiB.

A real TCP server on a loopback address (threads, no mail handling): what an attacker-controlled MX can send."""

from __future__ import annotations

import socketserver
import threading
from collections.abc import Iterator
from contextlib import contextmanager

OVERSIZED_LINE_BYTES = 70 * 1024


class _Hostile(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        self.wfile.write(b"220 hostile.test ESMTP\r\n")
        self.rfile.readline()  # EHLO
        self.wfile.write(b"250-hostile.test\r\n250 STARTTLS\r\n")
        self.rfile.readline()  # STARTTLS
        self.wfile.write(b"220 " + b"A" * OVERSIZED_LINE_BYTES + b"\r\n")
        self.wfile.flush()


class _Server(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True


@contextmanager
def oversized_line_smtp(address: str, port: int) -> Iterator[None]:
    """Serve the hostile SMTP dialogue on address:port until the block ends."""
    server = _Server((address, port), _Hostile)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
