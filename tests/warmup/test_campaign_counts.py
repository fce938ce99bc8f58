"""`Guard.campaign_counts` reads a campaign's counters as the shared contract of issue 25 keeps them (the hash
`warmup.keys.GroupKeys.campaign`): the day asked for, whether it is the hash's current day or the one before, and
each mailbox's share only when it was counted on that day."""

from __future__ import annotations

from typing import Any

from warmup import Guard
from warmup.keys import GroupKeys


def test_counts_of_the_current_and_the_previous_day_and_nothing_of_another(guard: Guard,
                                                                           guard_client: Any) -> None:
    guard_client.hset(GroupKeys("sales").campaign("q1"), mapping={
        "day": "2026-12-02", "day_count": 7, "prev_day": "2026-12-01", "prev_count": 120,
        "mbx:a@x.example": "2026-12-02|4", "mbx:b@x.example": "2026-12-01|40", "mbx:c@x.example": "2026-12-02|3"})
    assert guard.campaign_counts("sales", "q1", "2026-12-02") == (7, {"a@x.example": 4, "c@x.example": 3})
    assert guard.campaign_counts("sales", "q1", "2026-12-01") == (120, {"b@x.example": 40})
    assert guard.campaign_counts("sales", "q1", "2026-11-30") == (0, {})
    # another campaign of the group, or the same name in another group, has counters of its own
    assert guard.campaign_counts("sales", "q2", "2026-12-02") == (0, {})
    assert guard.campaign_counts("support", "q1", "2026-12-02") == (0, {})
