"""A UDP relay that adds a fixed delay to every DNS answer: the fallback when the kernel has no `netem` qdisc.

It forwards each query at once and holds the answer back `delay` seconds, concurrently for all queries, so a
client sees the same added round-trip time netem would give. It counts the queries it relays, whoever sends them.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import multiprocessing.sharedctypes
import socket
from typing import Any, cast


class _Upstream(asyncio.DatagramProtocol):
    def __init__(self, reply: Any, delay: float) -> None:
        self.reply = reply
        self.delay = delay
        self.transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.DatagramTransport, transport)

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        loop = asyncio.get_running_loop()
        loop.call_later(self.delay, self.reply, data)
        if self.transport is not None:
            self.transport.close()


class _Listener(asyncio.DatagramProtocol):
    def __init__(self, upstream: tuple[str, int], delay: float, counter: Any) -> None:
        self.upstream = upstream
        self.delay = delay
        self.counter = counter
        self.transport: asyncio.DatagramTransport | None = None
        self.pending: set[asyncio.Task[None]] = set()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.DatagramTransport, transport)

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        with self.counter.get_lock():
            self.counter.value += 1
        task = asyncio.ensure_future(self._forward(data, addr))
        self.pending.add(task)
        task.add_done_callback(self.pending.discard)

    async def _forward(self, data: bytes, client: tuple[str, int]) -> None:
        loop = asyncio.get_running_loop()

        def reply(answer: bytes) -> None:
            if self.transport is not None:
                self.transport.sendto(answer, client)

        transport, _ = await loop.create_datagram_endpoint(lambda: _Upstream(reply, self.delay),
                                                           remote_addr=self.upstream)
        transport.sendto(data)
        loop.call_later(5, transport.close)  # an upstream that never answers must not leak sockets


def _serve(sock: socket.socket, upstream: tuple[str, int], delay: float, counter: Any) -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        await loop.create_datagram_endpoint(lambda: _Listener(upstream, delay, counter), sock=sock)
        await asyncio.Event().wait()

    asyncio.run(main())


class DelayRelay:
    """Run the relay in its own process (so it does not share the measured process's CPU time slice)."""

    def __init__(self, upstream: tuple[str, int], delay: float, host: str = "127.0.0.1") -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((host, 0))
        self.address = (host, self.sock.getsockname()[1])
        self.counter = multiprocessing.Value("q", 0)
        self.process = multiprocessing.Process(target=_serve, args=(self.sock, upstream, delay, self.counter),
                                               daemon=True)

    @property
    def queries(self) -> int:
        return int(self.counter.value)

    def __enter__(self) -> DelayRelay:
        self.process.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.process.terminate()
        self.process.join(5)
        self.sock.close()
