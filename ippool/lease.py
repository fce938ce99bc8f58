"""A lease on a source IP for one send, and the meter that counts and logs fallback leases."""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable
from types import TracebackType
from typing import Protocol

log = logging.getLogger("ippool")

# Why a lease fell back to the host's primary IP.
NO_SLOT = "no_slot"  # every slot is retiring, ready, rotating or empty
UNKNOWN_HOST = "unknown_host"  # the host is not registered in Redis
REDIS_ERROR = "redis_error"  # Redis unreachable, timed out or refused the script


class _Releaser(Protocol):
    def _release(self, lease: Lease) -> None: ...
    def _renew(self, lease: Lease, ttl_s: float | None) -> bool: ...


class Lease:
    """The right to send one message from `source_ip`; release it when the send is over (or use `with`).

    `slot` is None and `fallback` True when no slot could be leased: `source_ip` is then the host's primary IP
    (None when even that is unknown: bind to no address and let the OS pick its default, the primary).
    """

    __slots__ = ("_owner", "_released", "fallback", "generation", "host", "member", "public_ip", "reason", "slot",
                 "source_ip", "ttl_s")

    def __init__(self, owner: _Releaser, host: str, *, source_ip: str | None, public_ip: str | None,
                 slot: int | None = None, member: str | None = None, generation: int | None = None,
                 ttl_s: float = 0.0, reason: str | None = None) -> None:
        self._owner = owner
        self.host = host
        self.source_ip = source_ip
        self.public_ip = public_ip
        self.slot = slot
        self.member = member  # the lease's entry in the host's lease set; None on fallback
        self.generation = generation  # generation of the slot's address when leased
        self.ttl_s = ttl_s
        self.fallback = slot is None
        self.reason = reason  # why it fell back (NO_SLOT, UNKNOWN_HOST, REDIS_ERROR), else None
        self._released = False

    def release(self) -> None:
        """End the lease (one round trip; a second call, or a fallback lease, does nothing). Never raises."""
        if self._released:
            return
        self._released = True
        if not self.fallback:
            self._owner._release(self)

    def renew(self, ttl_s: float | None = None) -> bool:
        """Extend a long send's lease to now + ttl_s (default: its TTL). False when the lease is already lost."""
        if self.fallback:
            return True
        if self._released:
            return False
        return self._owner._renew(self, ttl_s)

    def __enter__(self) -> Lease:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.release()

    def __repr__(self) -> str:
        where = f"slot {self.slot}" if not self.fallback else f"fallback ({self.reason})"
        return f"<Lease {self.host} {where} source_ip={self.source_ip} public_ip={self.public_ip}>"


class FallbackMeter:
    """Counts fallback leases by reason and logs them at most once per `interval_s` (a sick Redis must not
    flood the sender's log with one line per send)."""

    def __init__(self, interval_s: float = 60.0, monotonic: Callable[[], float] = time.monotonic,
                 logger: logging.Logger = log) -> None:
        self.interval_s = interval_s
        self._monotonic = monotonic
        self._log = logger
        self.totals: Counter[str] = Counter()
        self._window: Counter[str] = Counter()
        self._last_logged: float | None = None
        self._last_error = ""

    def record(self, reason: str, error: BaseException | None = None) -> None:
        """Count one fallback; log the window's counts when the last log line is at least `interval_s` old."""
        self.totals[reason] += 1
        self._window[reason] += 1
        if error is not None:
            self._last_error = f"{type(error).__name__}: {error}"
        now = self._monotonic()
        if self._last_logged is not None and now - self._last_logged < self.interval_s:
            return
        counts = ", ".join(f"{name}={count}" for name, count in sorted(self._window.items()))
        detail = f"; last Redis error: {self._last_error}" if self._last_error else ""
        self._log.warning("ippool: %d fallback lease(s) on the primary IP (%s)%s; next report in %.0fs",
                          sum(self._window.values()), counts, detail, self.interval_s)
        self._window.clear()
        self._last_logged = now
