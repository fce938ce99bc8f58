"""The 7-day denylist: addresses we released recently, which the rotator must not put back into service.

AWS hands a released address straight back to the next allocation, so an address we retired (its sends spent, maybe
burned) could return to a slot minutes later. Each host keeps its own sorted set (member = public IP, score = end
of the denial in ms, hash-tagged with the host like every other key); a lookup checks every registered host,
because an address released by one host can come back to any other.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ippool.keys import HostKeys
from ippool.status import text

DENY_DAYS = 7
# Every host that ever denied an address (a destroyed host's denials still count). Not hash-tagged: no script.
DENYING_HOSTS_KEY = "sendhost:denylist:hosts"
_DAY_MS = 86_400_000


class Denylist:
    """Read and extend the denylist in Redis; `clock` gives epoch seconds (injected for tests)."""

    def __init__(self, client: Any, clock: Callable[[], float], days: float = DENY_DAYS) -> None:
        self._client = client
        self._clock = clock
        self.days = days

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

    def add(self, host: str, public_ip: str) -> None:
        """Deny `public_ip` for `days` from now (idempotent: a second add only extends the denial)."""
        key = HostKeys(host).denylist
        self._client.sadd(DENYING_HOSTS_KEY, host)
        # GT still adds a new member; on an existing one it only moves the end of the denial later.
        self._client.zadd(key, {public_ip: self._now_ms() + int(self.days * _DAY_MS)}, gt=True)

    def listed(self, public_ip: str) -> bool:
        """Whether any host denies `public_ip` now."""
        now = self._now_ms()
        for host in self._client.smembers(DENYING_HOSTS_KEY):
            score = self._client.zscore(HostKeys(text(host)).denylist, public_ip)
            if score is not None and score > now:
                return True
        return False

    def size(self, host: str) -> int:
        """How many addresses `host` denies now (expired entries are pruned on the way)."""
        key = HostKeys(host).denylist
        now = self._now_ms()
        self._client.zremrangebyscore(key, "-inf", now)
        return int(self._client.zcard(key))
