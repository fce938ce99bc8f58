"""What the pool machinery needs to know about one sender host, independent of where it was configured.

The CLI builds these from the inventory (`sendhost_instance_id`, `sendhost_pool`, ...); tests and benches build
them directly. Also the tag names the rotation adds beside `ippool.aws.models`' vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass

from sendhost.model import DEFAULT_POOL_NAME

__all__ = ["DEFAULT_POOL_NAME", "HostSpec"]

# Set on a new EIP before it is associated: which EIP it replaces (so reconcile can finish the rotation), which
# rotator owns the attempt (so reconcile leaves a live rotation alone), and its PTR name when one is set (so the
# reaper resets reverse DNS before release even if the rotation died halfway).
TAG_REPLACES = "sendhost:replaces"
TAG_OWNER = "sendhost:owner"
TAG_SINCE = "sendhost:since"  # when the attempt began (ISO 8601 UTC), for reconcile's grace period
TAG_PTR = "sendhost:ptr"
TAG_PTR_ZONE = "sendhost:ptr_zone"  # the Route 53 zone of that forward record, so release can delete it
# The slot's private IP, on every EIP we put into a slot: the slot's durable address, for rebuilding Redis.
TAG_PRIVATE_IP = "sendhost:private_ip"


@dataclass(frozen=True)
class HostSpec:
    """One sender host's pool policy."""

    name: str
    instance_id: str
    primary_ip: str
    slots: int
    budget: tuple[int, int] = (8, 15)
    park_minutes: float = 15.0
    ptr_zone: str | None = None  # Route 53 zone for the forward A record; None: no PTR
    private_ips: tuple[str, ...] = ()  # slot n's private IP is private_ips[n] (the inventory's); (): AWS picks

    def ptr_name(self, slot: int, public_ip: str) -> str:
        """The host name one address of a slot resolves from and back to (`<host>-<slot>-<a-b-c-d>.<zone>`).

        Unique per address, never reused per slot: a resolver still caching the old address's A record can then
        never contradict the new address's PTR (forward-confirmed reverse DNS holds for both)."""
        if self.ptr_zone is None:
            raise ValueError(f"host {self.name} has no PTR zone")
        return f"{self.name}-{slot}-{public_ip.replace('.', '-')}.{self.ptr_zone.rstrip('.')}"
