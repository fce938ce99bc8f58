"""What the agent reads of a claimed row's campaign file: its tracking (`tracking`, for compose) and what the guard's
reservation needs (`pace`): the campaign's slot (its local day and caps) and the open time left in the row's window
today, over which the guard spreads the mailbox's remaining sends.

A row's window is its campaign's, as last applied (sender_campaigns.source), read on the wall clock of the lead's
own time zone, else the campaign's. Whether it is open is the claim's to decide (sender.ledger.window_intervals):
a row outside it is never claimed. The file is parsed once per campaign and file: the claim gives a hash of the
file, and a new hash (an `apply`) makes the next claim parse it again. Rows of `enqueue` have no window.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta

from sender.campaigns.pacing import Pacing
from sender.campaigns.spec import NO_TRACKING, Tracking, load_applied
from sender.campaigns.window import Schedule, zone
from sender.ledger.store import Claimed, Ledger
from sendhost.errors import ConfigError
from warmup import CampaignSlot

log = logging.getLogger("sendhost.sender")


@dataclass(frozen=True)
class _Applied:
    """What the agent keeps of one campaign file: its schedule (None: always open) and time zone, or why not."""

    name: str
    schedule: Schedule | None
    timezone: str
    error: str | None = None
    pacing: Pacing | None = None
    tracking: Tracking = NO_TRACKING


@dataclass(frozen=True)
class Pace:
    """What a row's reservation passes to the guard's pick: its campaign's slot and its window's open time left
    today (None and None for `enqueue`: the reservation is as it always was)."""

    campaign: CampaignSlot | None = None
    window_left_s: float | None = None


NO_PACE = Pace()


class Windows:
    """The campaign files' parses, shared by an agent's worker threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._applied: dict[int, tuple[str, _Applied]] = {}  # campaign id -> (file hash, what it says)

    def pace(self, ledger: Ledger, row: Claimed, now: datetime) -> Pace:
        """The campaign slot of `row`'s campaign on its own local day, and the open seconds left in the row's
        window today (None without a window)."""
        if row.campaign_id is None or row.source_hash is None:
            return NO_PACE
        applied = self._of(ledger, row.campaign_id, row.source_hash)
        if applied.pacing is None:
            return NO_PACE  # a file that does not parse: the claim keeps its rows back (no intervals)
        campaign_tz = zone(applied.timezone, "UTC")
        local_day = now.astimezone(campaign_tz).date()
        day_ends = datetime.combine(local_day + timedelta(days=1), time(), tzinfo=campaign_tz).astimezone(UTC)
        slot = CampaignSlot(applied.name, local_day.isoformat(), applied.pacing.daily_cap,
                            applied.pacing.max_per_mailbox_per_day, int(day_ends.timestamp() * 1000))
        left = None
        if applied.schedule is not None:
            left = applied.schedule.open_seconds_left(now, zone(row.lead_timezone, applied.timezone))
        return Pace(slot, left)

    def tracking(self, ledger: Ledger, row: Claimed) -> Tracking:
        """What the row's campaign file says of click and open tracking (none for `enqueue`)."""
        if row.campaign_id is None or row.source_hash is None:
            return NO_TRACKING
        return self._of(ledger, row.campaign_id, row.source_hash).tracking

    def _of(self, ledger: Ledger, campaign_id: int, source_hash: str) -> _Applied:
        with self._lock:
            cached = self._applied.get(campaign_id)
        if cached is not None and cached[0] == source_hash:
            return cached[1]
        found = ledger.campaign_source(campaign_id)
        if found is None:  # the claim just joined it: only a deleted campaign gets here
            return _Applied(str(campaign_id), None, "UTC", f"campaign {campaign_id} is gone")
        name, source, stored_hash = found
        try:
            spec = load_applied(name, source)
            pacing = spec.pacing
            applied = _Applied(name, Schedule.of(pacing), pacing.timezone, pacing=pacing, tracking=spec.tracking)
        except ConfigError as exc:
            log.error("sender: %s; its rows wait until it is applied again", exc)
            applied = _Applied(name, None, "UTC", f"the applied file does not parse: {exc}")
        with self._lock:
            self._applied[campaign_id] = (stored_hash, applied)
        return applied
