"""Redis key names of the ippool, built in one place.

Every per-host key carries the hash tag `{host}`, so all keys one Lua script touches live in one Redis Cluster
slot. PoolScripts receive these names in KEYS and never build key names themselves.
"""

from __future__ import annotations

from functools import cached_property

# Index of registered hosts, for `pool status` with no host. Not hash-tagged: no script touches it.
HOSTS_KEY = "sendhost:hosts"
# Prefix of a rotating worker's heartbeat key (`sendhost:worker:<owner>`, expires unless refreshed): reconcile
# treats a rotation whose owner has no heartbeat as abandoned. Not hash-tagged: no script touches it.
WORKER_PREFIX = "sendhost:worker:"
# Counter of throttled AWS attempts (RequestLimitExceeded, ...) across every worker: AWS throttles per account.
AWS_THROTTLES_KEY = "sendhost:aws:throttles"
# Hash of the worker's last Elastic IP quota reading per region (ippool.quota_readings), for the exporter.
EIP_QUOTA_KEY = "sendhost:aws:eip_quota"


def check_host_name(host: str) -> str:
    """Return `host` if it can be embedded in a hash tag; else raise ValueError naming it."""
    if not host or "{" in host or "}" in host or any(c.isspace() for c in host):
        raise ValueError(f"bad host name {host!r}: it must be non-empty, without braces or whitespace")
    return host


class HostKeys:
    """The Redis keys of one host: `sendhost:{host}:meta`, `sendhost:{host}:leases`, `sendhost:{host}:slot:<n>`."""

    __slots__ = ("__dict__", "host", "prefix")

    def __init__(self, host: str) -> None:
        self.host = check_host_name(host)
        self.prefix = f"sendhost:{{{host}}}"

    @cached_property
    def meta(self) -> str:
        """Hash: primary_ip, budget_min, budget_max, slot_count, leases_retired (fallbacks_total before the
        fallback counter got its own key)."""
        return f"{self.prefix}:meta"

    @cached_property
    def fallbacks(self) -> str:
        """String: leases that fell back to the primary IP, raised by lease.lua with INCR. A key of its own, not a
        meta field, so the sender's ACL user can count a fallback without any write to the meta hash."""
        return f"{self.prefix}:fallbacks"

    @cached_property
    def leases(self) -> str:
        """Sorted set of live leases: member `<slot>:<token>`, score = expiry in ms."""
        return f"{self.prefix}:leases"

    @cached_property
    def denylist(self) -> str:
        """Sorted set of addresses this host released: member public IP, score = end of its denial in ms."""
        return f"{self.prefix}:denylist"

    @cached_property
    def parked(self) -> str:
        """Hash of the host's parked EIPs: allocation id -> "<public ip>|<slot>|<parked until, epoch s>"."""
        return f"{self.prefix}:parked"

    @cached_property
    def stats(self) -> str:
        """Hash of counters (rotations, redraws:<reason>, aws_throttles, reconcile:<kind>) and last_rotation_ms."""
        return f"{self.prefix}:stats"

    @cached_property
    def claims(self) -> str:
        """Hash slot -> owner id of the rotator that holds the slot while it rotates (reconcile's liveness check)."""
        return f"{self.prefix}:claims"

    def slot(self, index: int) -> str:
        """Hash of one slot: private_ip, public_ip, allocation_id, state, budget, generation (admin-written only;
        before the used count got its own key it held `used` too, see `used`)."""
        return f"{self.prefix}:slot:{index}"

    def used(self, index: int) -> str:
        """String: sends leased on the slot's current address. lease.lua raises it with INCR; only the scripts that
        place an address (_place.lua, fenced by the generation) reset it. A key of its own, not a slot-hash field,
        so the sender's ACL user can count a send (INCR only adds) without any write to the slot hash."""
        return f"{self.prefix}:slot:{index}:used"

    def slots(self, count: int) -> list[str]:
        """Slot hashes 0..count-1, in slot order (scripts index them as KEYS[first + n])."""
        return [self.slot(index) for index in range(count)]

    def slots_with_used(self, count: int) -> list[str]:
        """Slot hash and used key of slots 0..count-1, in pairs (scripts index them as KEYS[first + 2n], +1)."""
        return [key for index in range(count) for key in (self.slot(index), self.used(index))]

    def lease_keys(self, count: int) -> list[str]:
        """KEYS of lease.lua: meta, leases, the fallback counter, then slot 0..count-1's hash and used key."""
        return [self.meta, self.leases, self.fallbacks, *self.slots_with_used(count)]

    def with_slots(self, count: int) -> list[str]:
        """KEYS for the scripts that scan every slot: meta, leases, then slot 0..count-1's hash and used key."""
        return [self.meta, self.leases, *self.slots_with_used(count)]
