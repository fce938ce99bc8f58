"""Screens for a freshly drawn address: a callable that returns why the address must not serve, or None.

The rotator asks its screen after its own denylist and parked checks; the DNSBL screen asks the configured DNS
blocklists (RFC 5782) through dns_audit's resolver.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Protocol

from dns_audit.dnsbl import reversed_ip
from dns_audit.resolver import Resolver


class Screen(Protocol):
    """`screen(public_ip)` -> a short reason ("dnsbl:zen.spamhaus.org") when the address must not serve, else None."""

    def __call__(self, public_ip: str) -> str | None: ...


def no_screen(public_ip: str) -> str | None:
    """The screen of a pool with no DNSBL configured: every address passes."""
    return None


class DnsblScreen:
    """Rejects an address listed on any of `zones`. A refusal (127.255.255.x, REFUSED) or a failed lookup is not a
    listing: the address passes, since a sick blocklist must not stop rotation.

    `resolver_factory()` makes a resolver per screening: a resolver's answer cache belongs to one event loop.
    """

    def __init__(self, resolver_factory: Callable[[], Resolver], zones: Sequence[str]) -> None:
        self._resolver_factory = resolver_factory
        self.zones = tuple(zones)

    def __call__(self, public_ip: str) -> str | None:
        return asyncio.run(self._first_listing(public_ip))

    async def _first_listing(self, public_ip: str) -> str | None:
        name = reversed_ip(public_ip)
        resolver = self._resolver_factory()
        answers = await asyncio.gather(*(resolver.query(f"{name}.{zone}", "A") for zone in self.zones))
        for zone, answer in zip(self.zones, answers, strict=True):
            if answer.status == "refused" or answer.failed:
                continue
            codes = answer.texts()
            if any(code.startswith("127.") and not code.startswith("127.255.255.") for code in codes):
                return f"dnsbl:{zone}"
        return None
