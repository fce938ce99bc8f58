"""Every Redis key the warmup package uses, built in one place.

Keys a script touches together share a hash tag: the mailbox group (`sendhost:warmup:{group}:...`), so a
`pick` across a group's mailboxes is one script on one Redis Cluster slot. Keys no script touches together
with a group's keys (the registry, domain health, the system-wide success window) live outside the tag.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

PREFIX = "sendhost:warmup"
GROUP_RE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")

REGISTRY = f"{PREFIX}:mailboxes"  # hash: address -> group
SYSTEM_SUCCESSES = f"{PREFIX}:{{system}}:successes"  # zset: confirmed reservation -> confirmed at (ms)
REBUILD_LOCK_PREFIX = "sendhost:sender"  # GroupKeys.rebuild_lock: outside PREFIX, see there


def domain_health(domain: str) -> str:
    """Hash: ISO day -> spam rate reported for the sending domain."""
    return f"{PREFIX}:health:domain:{domain}"


@dataclass(frozen=True)
class GroupKeys:
    group: str

    @property
    def tag(self) -> str:
        return f"{PREFIX}:{{{self.group}}}"

    @property
    def settled(self) -> str:
        """Zset: settled (confirmed or cancelled) reservation token -> settled at (ms), so settling is once."""
        return f"{self.tag}:settled"

    @property
    def rebuild_lock(self) -> str:
        """String: the token of the one process restoring the group's counters from the sender's ledger. Named as
        the sender first named it, so the Redis ACL users already provisioned for senders still grant it."""
        return f"{REBUILD_LOCK_PREFIX}:{{{self.group}}}:rebuild"

    def campaign(self, name: str) -> str:
        """Hash: campaign `name`'s reservations per its local day, (day, day_count) and (prev_day, prev_count), and
        `mbx:<address>` = "<campaign day>|<count>" per mailbox; under the group's tag, as the campaign sends from
        this one group, so a reservation takes the campaign's slot and a mailbox's in one script."""
        return f"{self.tag}:campaign:{name}"

    def mailbox(self, address: str) -> MailboxKeys:
        return MailboxKeys(self, address)


@dataclass(frozen=True)
class MailboxKeys:
    group_keys: GroupKeys
    address: str

    @property
    def state(self) -> str:
        """Hash: settings, day counters, reservation sequence, last send, pause/hold/breaker state."""
        return f"{self.group_keys.tag}:mbx:{self.address}"

    @property
    def schedule(self) -> str:
        """Zset: "day|cap|next_midnight_ms|day_number|state" -> the day's local midnight (ms)."""
        return f"{self.state}:schedule"

    @property
    def failures(self) -> str:
        """Zset: failed reservation token -> failed at (ms), the circuit breaker's window."""
        return f"{self.state}:failures"

    @property
    def health(self) -> str:
        """Hash: ISO day -> spam rate reported for this mailbox alone."""
        return f"{self.state}:health"
