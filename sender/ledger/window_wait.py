"""What of a campaign waits for its sending window now: for `campaign status` (issue 25).

A row due now (not one whose own delay is not over) whose lead's window is closed now waits for the window, in
the one-reason-per-row sorting of sender.ledger.waits: this is that sorting's window lines, summed, with when the
first of them opens; or, when nothing waits for it, when the window closes (open now) or opens next on the
campaign's own clock.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from sender.campaigns.spec import CampaignSpec
from sender.campaigns.window import Schedule, zone
from sender.ledger.store import Ledger
from sender.ledger.waits import Conditions, Reason, Waits, gather, read_rows


@dataclass(frozen=True)
class WindowWait:
    rows: int  # rows due that wait for their window
    opens: datetime | None  # the earliest opening they wait for, in the campaign's time zone; None: open now
    closes: datetime | None = None  # open now on the campaign's clock: when it closes

    def as_json(self) -> dict[str, object]:
        return {"rows": self.rows, "opens": self.opens.isoformat() if self.opens else None,
                "closes": self.closes.isoformat() if self.closes else None}


def window_wait(ledger: Ledger, spec: CampaignSpec, waits: Waits | None = None) -> WindowWait | None:
    """How many rows of `spec`'s campaign wait for its window now, and when it opens (or closes); None: no window.
    `waits`: the campaign's rows sorted already (else sorted here, the guard unread)."""
    schedule = Schedule.of(spec.pacing)
    if schedule is None:
        return None
    now = ledger.now() or datetime.now(UTC)
    campaign_tz = zone(spec.pacing.timezone, "UTC")
    if waits is None:
        waits = gather(read_rows(ledger, spec.name, now),
                       Conditions(now, "running", spec.pacing.timezone, schedule), "not read")
    opens = waits.first(Reason.WINDOW)
    closes = schedule.closes(now, campaign_tz)
    if opens is None and closes is None:  # nothing waits: still say when the window opens next for the campaign
        opens = schedule.next_opening(now, campaign_tz)
    return WindowWait(waits.count(Reason.WINDOW), opens.astimezone(campaign_tz) if opens else None,
                      closes.astimezone(campaign_tz) if closes else None)
