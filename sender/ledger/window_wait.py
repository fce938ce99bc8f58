"""What of a campaign waits for its sending window now: for `campaign status` (issue 25).

A queued (or retry) row waits for the window when its lead's window is closed now and the row is due by the time it
next opens (due now and not yet claimed, or put back by the agent until the opening); a row due after that opening
waits for its delay, not for the window. Counted per lead time zone in SQL, so a large campaign is not read whole.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from sender.campaigns.spec import CampaignSpec
from sender.campaigns.window import Schedule, zone
from sender.ledger.store import Ledger


@dataclass(frozen=True)
class WindowWait:
    rows: int  # rows due by the window's next opening that wait for it
    opens: datetime | None  # the earliest opening they wait for, in the campaign's time zone; None: none waits

    def as_json(self) -> dict[str, object]:
        return {"rows": self.rows, "opens": self.opens.isoformat() if self.opens else None}


def window_wait(ledger: Ledger, spec: CampaignSpec) -> WindowWait | None:
    """How many rows of `spec`'s campaign wait for its window now, and when it next opens; None: no window."""
    schedule = Schedule.of(spec.pacing)
    if schedule is None:
        return None
    now = ledger.now() or datetime.now(UTC)
    campaign_tz = zone(spec.pacing.timezone, "UTC")
    rows = 0
    opens: datetime | None = None
    for (name,) in ledger.fetch_all("campaign_queued_zones", {"name": spec.name}, f"status of {spec.name}"):
        tz = zone(name, spec.pacing.timezone)
        if schedule.is_open(now, tz):
            continue
        opening = schedule.next_opening(now, tz)
        if opening is None:
            continue
        (count,) = ledger.fetch_one("campaign_due_by", {"name": spec.name, "timezone": name, "until": opening},
                                    f"status of {spec.name}") or (0,)
        if count:
            rows += int(count)
            opens = opening if opens is None else min(opens, opening)
    if opens is None:  # nothing waits: still say when the window opens next for the campaign's own time zone
        opens = schedule.next_opening(now, campaign_tz)
    return WindowWait(rows, opens.astimezone(campaign_tz) if opens else None)
