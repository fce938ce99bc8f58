"""What a stranger's connection may cost the web service: read deadlines, a body cap, and a bound on log lines.

uvicorn bounds connections (`limit_concurrency`: one past it gets 503) and header size (h11's
`max_incomplete_event_size`), but sets no deadline on reading a request: its keep-alive timer starts only after a
response, so a client that sends half a request line, or headers and then one body byte a minute, holds its
connection forever. `GuardedH11Protocol` is uvicorn's own h11 protocol with two timers added, so everything else
(flow control, pipelining, shutdown) stays uvicorn's.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import Any

import h11
from starlette.requests import Request
from uvicorn.protocols.http.h11_impl import H11Protocol

HEADER_TIMEOUT_S = 10.0  # from a request's first byte (or the connection's opening) to its last header
BODY_TIMEOUT_S = 20.0  # from the last header to the body's end: a one-click body or a relay batch takes far less


class BodyTooLarge(Exception):
    """The request's body passed the cap; the rest was never read."""


async def read_capped(request: Request, cap: int) -> bytes:
    """The request's body, read as it streams in and stopped at `cap` bytes (BodyTooLarge past it): a chunked body
    declares no length, so only counting what arrives bounds what we hold."""
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > cap:
            raise BodyTooLarge
    return bytes(body)


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol, closing a connection whose request headers or body do not arrive in time."""

    header_timeout_s = HEADER_TIMEOUT_S
    body_timeout_s = BODY_TIMEOUT_S

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline: asyncio.TimerHandle | None = None
        self._waiting_for: object = None  # the h11 state the deadline is for: IDLE (headers) or SEND_BODY

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()  # a connection that never sends a byte is as half-sent as one that stops mid-header

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._arm()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        # between requests uvicorn's keep-alive timer rules (the proxy's idle connections); the header deadline
        # starts again with the next request's first byte
        self._disarm()
        self._rearm_body_if_needed()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        """Start the deadline of the phase the client is in, unless it is already running for that phase."""
        state = self.conn.their_state
        if state is h11.IDLE and (self.cycle is None or self.cycle.response_complete):
            if self._waiting_for is not h11.IDLE:
                self._start(h11.IDLE, self.header_timeout_s)
        elif state is h11.SEND_BODY:
            if self._waiting_for is not h11.SEND_BODY:
                self._start(h11.SEND_BODY, self.body_timeout_s)
        else:  # the request is all in: what is left is ours to answer
            self._disarm()

    def _rearm_body_if_needed(self) -> None:
        # answered before the body ended (a refusal): the rest must still arrive in time or the connection goes
        if self.conn.their_state is h11.SEND_BODY:
            self._start(h11.SEND_BODY, self.body_timeout_s)

    def _start(self, phase: object, seconds: float) -> None:
        self._disarm()
        self._waiting_for = phase
        self._deadline = self.loop.call_later(seconds, self._expired, phase)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
        self._deadline, self._waiting_for = None, None

    def _expired(self, phase: object) -> None:
        self._deadline, self._waiting_for = None, None
        if self.conn.their_state is phase and not self.transport.is_closing():
            _log_timeouts.warning("closed a connection whose request %s did not arrive in time",
                                  "headers" if phase is h11.IDLE else "body")
            self.transport.close()


_log_timeouts = logging.getLogger("sendhost.sender.web")


class RateLimit(logging.Filter):
    """At most `burst` lines per logger and message template every `window_s` seconds; the first line after a quiet
    window says how many were dropped. A flood (a scanner, fd exhaustion) then costs a few lines, not a full disk."""

    def __init__(self, burst: int = 20, window_s: float = 10.0) -> None:
        super().__init__()
        self.burst, self.window_s = burst, window_s
        self._seen: dict[tuple[str, str], list[float]] = {}  # key -> [window start, lines in it, dropped]
        self._lock = threading.Lock()  # records come from the loop and from the threadpool

    def filter(self, record: logging.LogRecord) -> bool:
        key = (record.name, str(record.msg))
        now = time.monotonic()
        with self._lock:
            if len(self._seen) > 1000:  # templates are few; this only bounds a pathological caller
                self._seen.clear()
            start, count, dropped = self._seen.get(key, [now, 0, 0])
            if now - start >= self.window_s:
                start, count = now, 0
                if dropped:
                    record.msg = f"{record.msg} (and {int(dropped)} more like it dropped)"
                    dropped = 0
            if count >= self.burst:
                self._seen[key] = [start, count, dropped + 1]
                return False
            self._seen[key] = [start, count + 1, dropped]
            return True


def limit_log_rate(root: logging.Logger | None = None) -> RateLimit:
    """Put one RateLimit on every handler of the root logger (where uvicorn's, asyncio's and our lines end)."""
    limit = RateLimit()
    for handler in (root or logging.getLogger()).handlers:
        handler.addFilter(limit)
    return limit
