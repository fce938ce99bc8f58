"""DNS fault injection for tests, over real UDP sockets.

`blackhole()` is a UDP socket that never answers (an unreachable resolver). `FaultProxy` is a FAKE resolver in
front of a real NSD: it forwards every query to NSD unchanged, except names under `drop` suffixes (never answered:
a timeout) and `servfail` suffixes (answered SERVFAIL), which no real authoritative server produces on demand.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import dns.exception
import dns.message
import dns.query
import dns.rcode


@contextmanager
def blackhole(host: str = "127.0.0.1") -> Iterator[str]:
    """host:port of a UDP socket that receives queries and never replies."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind((host, 0))
    try:
        yield f"{host}:{sock.getsockname()[1]}"
    finally:
        sock.close()


class FaultProxy:
    def __init__(self, upstream: tuple[str, int], drop: tuple[str, ...] = (), servfail: tuple[str, ...] = (),
                 host: str = "127.0.0.1") -> None:
        self.upstream = upstream
        self.drop = tuple(s.lower() for s in drop)
        self.servfail = tuple(s.lower() for s in servfail)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((host, 0))
        self.sock.settimeout(0.2)
        self.address = f"{host}:{self.sock.getsockname()[1]}"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def _matches(self, name: str, suffixes: tuple[str, ...]) -> bool:
        return any(name == s or name.endswith("." + s) or s in name for s in suffixes)

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                wire, client = self.sock.recvfrom(65535)
            except (TimeoutError, OSError):
                continue
            try:
                query = dns.message.from_wire(wire)
            except dns.exception.DNSException:
                continue
            name = query.question[0].name.to_text().rstrip(".").lower()
            if self._matches(name, self.drop):
                continue
            if self._matches(name, self.servfail):
                response = dns.message.make_response(query)
                response.set_rcode(dns.rcode.SERVFAIL)
                self.sock.sendto(response.to_wire(), client)
                continue
            try:
                upstream = dns.query.udp(query, self.upstream[0], port=self.upstream[1], timeout=2)
            except (dns.exception.DNSException, OSError):
                continue
            self.sock.sendto(upstream.to_wire(), client)

    def __enter__(self) -> FaultProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.sock.close()
