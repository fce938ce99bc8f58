"""The agent's sending-window check: is a claimed row's lead inside its campaign's window now, else when it opens.

A row's window is its campaign's, as last applied (sender_campaigns.source), read on the wall clock of the lead's
own time zone, else the campaign's. The file is parsed once per campaign and file: the claim gives a hash of the
file, and a new hash (an `apply`) makes the next claim parse it again. Rows of `enqueue` have no window.
The same parse gives the campaign's tracking (`tracking`, for compose) and what the guard's reservation needs
(`pace`): the campaign's slot (its local day and caps) and the open time left in the row's window today, over which
the guard spreads the mailbox's remaining sends.
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

NEVER_OPENS_DELAY_S = 86400.0  # a window that never opens (every range in a DST gap): look again tomorrow
BROKEN_DELAY_S = 300.0  # a file that no longer parses: look again in a while (an apply fixes it)


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


@dataclass(frozen=True)
class Closed:
    """A row that may not go now: when its window opens (None: not known), how long to put it back for, and the
    words for its history."""

    opens: datetime | None
    delay_s: float
    why: str


class Windows:
    """The window check, shared by an agent's worker threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._applied: dict[int, tuple[str, _Applied]] = {}  # campaign id -> (file hash, what it says)

    def closed(self, ledger: Ledger, row: Claimed, now: datetime) -> Closed | None:
        """None when `row` may go at `now`; else when its window opens."""
        if row.campaign_id is None or row.source_hash is None:
            return None  # `enqueue`: no campaign file, no window
        applied = self._of(ledger, row.campaign_id, row.source_hash)
        if applied.error is not None:
            # Fail closed: a file that was valid when applied and no longer parses must not send around its window.
            return Closed(None, BROKEN_DELAY_S, applied.error)
        if applied.schedule is None:
            return None
        tz = zone(row.lead_timezone, applied.timezone)
        if applied.schedule.is_open(now, tz):
            return None
        opens = applied.schedule.next_opening(now, tz)
        delay = NEVER_OPENS_DELAY_S if opens is None else max((opens - now).total_seconds(), 0.0)
        return Closed(opens, delay, f"outside the sending window of campaign {applied.name} ({tz.key}); opens "
                      f"{opens.astimezone(tz).isoformat() if opens else 'never'}")

    def pace(self, ledger: Ledger, row: Claimed, now: datetime) -> Pace:
        """The campaign slot of `row`'s campaign on its own local day, and the open seconds left in the row's
        window today (None without a window)."""
        if row.campaign_id is None or row.source_hash is None:
            return NO_PACE
        applied = self._of(ledger, row.campaign_id, row.source_hash)
        if applied.pacing is None:
            return NO_PACE  # a file that does not parse: `closed` already keeps its rows back
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
