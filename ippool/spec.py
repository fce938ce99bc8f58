"""What the pool machinery derives from a sender host (`sendhost.model.SenderHost`, the inventory's own record):
its addresses' PTR names; and the tag names the rotation adds beside `ippool.aws.models`' vocabulary.
"""

from __future__ import annotations

from sendhost.model import DEFAULT_POOL_NAME, SenderHost

__all__ = ["DEFAULT_POOL_NAME", "ptr_name"]

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


def ptr_name(host: SenderHost, slot: int, public_ip: str) -> str:
    """The host name one address of a slot resolves from and back to (`<host>-<slot>-<a-b-c-d>.<zone>`).

    Unique per address, never reused per slot: a resolver still caching the old address's A record can then
    never contradict the new address's PTR (forward-confirmed reverse DNS holds for both)."""
    if host.forward_zone is None:
        raise ValueError(f"host {host.name} has no PTR zone")
    return f"{host.name}-{slot}-{public_ip.replace('.', '-')}.{host.forward_zone.rstrip('.')}"
