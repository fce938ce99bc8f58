"""A campaign's reservations on one of its days, read from its hash (`warmup.keys.GroupKeys.campaign`): what
`sendhost campaign status` shows against the campaign's daily cap and its per-mailbox share. Reads only."""

from __future__ import annotations

from collections.abc import Mapping

import redis

from warmup import keys

MAILBOX_FIELD_PREFIX = "mbx:"


def count_on(fields: Mapping[str, str], day: str) -> int:
    """The campaign's reservations on `day`: the hash keeps its current day and the one before."""
    if fields.get("day") == day:
        return int(fields.get("day_count", 0))
    if fields.get("prev_day") == day:
        return int(fields.get("prev_count", 0))
    return 0


def per_mailbox_on(fields: Mapping[str, str], day: str) -> dict[str, int]:
    """Each mailbox's reservations for the campaign on `day` ("<day>|<count>"; another day's count is stale: 0)."""
    counts: dict[str, int] = {}
    for field, value in fields.items():
        if field.startswith(MAILBOX_FIELD_PREFIX):
            counted_day, _, count = value.partition("|")
            if counted_day == day:
                counts[field.removeprefix(MAILBOX_FIELD_PREFIX)] = int(count)
    return counts


def campaign_counts(client: redis.Redis, group: str, name: str, day: str) -> tuple[int, dict[str, int]]:
    """Campaign `name` (of mailbox group `group`) on its local `day` (ISO date): its count, and each mailbox's."""
    raw = client.hgetall(keys.GroupKeys(group).campaign(name))
    fields = {str(k): str(v) for k, v in raw.items()}
    return count_on(fields, day), per_mailbox_on(fields, day)
