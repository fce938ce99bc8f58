"""The probe endpoint: a tiny TCP server that answers each connection with the address it came from.

`host verify` connects to it from each slot address on a sender host; the answer proves which source address
the slot really presents.
"""

from __future__ import annotations

import socketserver
import threading
from types import TracebackType

from provisioning.errors import ProvisionConfigError


def parse_endpoint(text: str, what: str = "--listen") -> tuple[str, int]:
    """Split HOST:PORT; raise ProvisionConfigError naming `what` when it is not one."""
    host, sep, port_text = text.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise ProvisionConfigError(f"{what} {text!r}: expected HOST:PORT, e.g. 10.0.1.5:7070")
    return host, int(port_text)


class _Answer(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        self.request.sendall(f"{self.client_address[0]}\n".encode())


class _Server(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True


class Probe:
    """The probe server; use as a context manager (background thread) or call `serve_forever`."""

    def __init__(self, host: str, port: int) -> None:
        try:
            self._server = _Server((host, port), _Answer)
        except OSError as exc:
            raise ProvisionConfigError(f"--listen {host}:{port}: cannot listen there ({exc.strerror})") from None
        self._thread: threading.Thread | None = None

    @property
    def address(self) -> tuple[str, int]:
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    def serve_forever(self) -> None:
        try:
            self._server.serve_forever(poll_interval=0.2)
        finally:
            self._server.server_close()

    def __enter__(self) -> Probe:
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)
        self._thread.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
