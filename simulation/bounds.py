"""What bound a run: the limit that stopped its sending, named from the run's own data (the guard's cap of each
mailbox's local day, the sends of each day, the campaigns' caps and windows, the leads turned away), with its
figures: `76 sends a weekday: the 3 mailboxes' warm-up caps (...); 1,201 of 1,680 leads that came in were turned
away`.

    bound = run_bound(result, imported=508, queued=12)

A mailbox-day is counted when the whole of that local day lay inside the run and its campaign's window opens on its
weekday; it is *at its cap* when it sent its cap. A campaign-day likewise, on the campaign's own day, against its
`daily_cap`. The limit named is, in this order: the campaigns' caps when reached on at least half their days, the
mailboxes' caps likewise, else the window's hours when most leads turned away came while their window was closed,
else (leads turned away all the same) the senders' pace, else the leads themselves (every step due went out).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass
from datetime import date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from sender.campaigns.pacing import DAYS
from sender.campaigns.spec import CampaignSpec
from simulation.engine import SimResult

WEEKDAYS = (0, 1, 2, 3, 4)
LIMITS = {
    "campaign-cap": "the campaign's daily cap",
    "mailbox-caps": "the mailboxes' warm-up caps",
    "window": "the window's hours: leads arriving while theirs was closed waited, an hour's worth at most",
    "gap": "the senders' pace: each mailbox's minimum gap between sends, the guard's spread over the window",
    "leads": "the leads coming in: every step due went out",
}


@dataclass(frozen=True)
class Bound:
    """The run's binding limit and the figures that show it."""

    limit: str  # a key of LIMITS
    sends: int
    days: int
    open_days: int  # days of the run on which a campaign's window opens (every day without a window)
    day_word: str  # "weekday" for a Monday-Friday window, "sending day" for another, else "day"
    mailboxes: int
    caps_per_open_day: float  # the mailboxes' caps summed: each one's average over its counted days
    cap_low: int  # the lowest and highest cap of one mailbox on a counted day (the ramp's span in the run)
    cap_high: int
    mailbox_days: int
    mailbox_days_at_cap: int
    campaign_cap: int | None  # the campaigns' daily caps summed (None: no campaign has one)
    campaign_days: int
    campaign_days_at_cap: int
    window: str | None  # the campaigns' windows as their files write them (None: no window)
    leads_in: int  # leads that came in: imported and turned away
    turned_away: int
    turned_away_closed: int  # of them, leads whose window was closed when they came to be imported
    queued_at_end: int  # rows queued or retrying at the end (due, or due later)

    @property
    def sends_per_day(self) -> float:
        return self.sends / self.days if self.days else 0.0

    @property
    def sends_per_open_day(self) -> float:
        return self.sends / self.open_days if self.open_days else 0.0

    def text(self) -> str:
        """The limit in words, with its figures."""
        rate = f"{self.sends_per_day:.0f} sends a day"
        if self.day_word != "day":
            rate += f" ({self.sends_per_open_day:.0f} a {self.day_word}, none on the others)"
        caps = (f"{self.caps_per_open_day:.0f} a {self.day_word} together, {self._span()} each; at its cap on "
                f"{self.mailbox_days_at_cap} of {self.mailbox_days} mailbox-{self.day_word}s")
        mailboxes = f"the {self.mailboxes} mailbox{'es' if self.mailboxes != 1 else ''}'"
        if self.limit == "campaign-cap":
            why = (f"the campaigns' daily caps ({self.campaign_cap} a day together; reached on "
                   f"{self.campaign_days_at_cap} of {self.campaign_days} campaign-{self.day_word}s), under "
                   f"{mailboxes} warm-up caps ({caps})")
        elif self.limit == "mailbox-caps":
            why = f"{mailboxes} warm-up caps ({caps})"
        elif self.limit == "window":
            why = (f"the window's hours ({self.window}): a lead arriving while its window is closed waits for it, and "
                   f"while an hour's worth of its time zone wait the next are turned away; far under {mailboxes} "
                   f"warm-up caps ({caps})")
        elif self.limit == "gap":
            why = (f"the senders' pace (each mailbox's minimum gap between sends, the guard's spread over the "
                   f"window), under {mailboxes} warm-up caps ({caps})")
        else:
            why = f"the leads coming in: every step due went out, under {mailboxes} warm-up caps ({caps})"
        parts = [f"{rate}: {why}"]
        if self.turned_away:
            closed = f", {self.turned_away_closed:,} of them while their window was closed" if self.window else ""
            parts.append(f"{self.turned_away:,} of the {self.leads_in:,} leads that came in arrived beyond it "
                         f"(turned away{closed})")
        if self.queued_at_end:
            parts.append(f"{self.queued_at_end:,} rows still queued at the end")
        return "; ".join(parts)

    def _span(self) -> str:
        if self.cap_low == self.cap_high:
            return f"{self.cap_high} a day"
        return f"{self.cap_low} to {self.cap_high} a day on the ramp"

    def to_json(self) -> dict[str, Any]:
        document = asdict(self)
        document.update(meaning=LIMITS[self.limit], text=self.text(),
                        sends_per_day=round(self.sends_per_day, 1),
                        sends_per_open_day=round(self.sends_per_open_day, 1),
                        caps_per_open_day=round(self.caps_per_open_day, 1))
        return document


def run_bound(result: SimResult, imported: int, queued: int) -> Bound:
    """The run's bound: `imported` leads (the campaigns'), `queued` rows left at the end (their steps')."""
    windows = {spec.group: spec.pacing.window for spec in result.specs if spec.pacing.window is not None}
    open_weekdays = sorted({day for window in windows.values() for day in window.days}) if windows else []
    mailbox_days, at_cap, caps_of = _mailbox_days(result, windows)
    caps = [cap for each in caps_of.values() for cap in each]
    campaign_days, campaign_at_cap = _campaign_days(result)
    capped = [spec.pacing.daily_cap for spec in result.specs if spec.pacing.daily_cap is not None]
    turned_away = result.leads_turned_away
    if campaign_days and 2 * campaign_at_cap >= campaign_days:
        limit = "campaign-cap"
    elif mailbox_days and 2 * at_cap >= mailbox_days:
        limit = "mailbox-caps"
    elif windows and 2 * result.leads_turned_away_closed > turned_away:
        limit = "window"
    elif turned_away:
        limit = "gap"
    else:
        limit = "leads"
    run_days = [(datetime.fromtimestamp(result.start_s, ZoneInfo("UTC")) + timedelta(days=n)).date()
                for n in range(result.config.days)]
    open_days = sum(1 for day in run_days if not open_weekdays or day.weekday() in open_weekdays)
    if not open_weekdays or len(open_weekdays) == len(DAYS):
        word = "day"
    else:
        word = "weekday" if tuple(open_weekdays) == WEEKDAYS else "sending day"
    return Bound(
        limit=limit, sends=len(result.log.sends), days=result.config.days, open_days=open_days, day_word=word,
        mailboxes=len(result.inventory.mailboxes),
        caps_per_open_day=sum(sum(each) / len(each) for each in caps_of.values() if each),
        cap_low=min(caps, default=0), cap_high=max(caps, default=0), mailbox_days=mailbox_days,
        mailbox_days_at_cap=at_cap, campaign_cap=sum(capped) if capped else None, campaign_days=campaign_days,
        campaign_days_at_cap=campaign_at_cap,
        window="; ".join(sorted({str(window) for window in windows.values()})) or None,
        leads_in=imported + turned_away, turned_away=turned_away,
        turned_away_closed=result.leads_turned_away_closed, queued_at_end=queued)


def _mailbox_days(result: SimResult, windows: dict[str, Any]) -> tuple[int, int, dict[str, list[int]]]:
    """(mailbox-days counted, of them at the cap, each mailbox's caps of its counted days): the guard's cap as each
    send recorded it, the ramp's (`result.caps`) on a day without a send."""
    sent = Counter((send.mailbox, send.local_day) for send in result.log.sends)
    guard_cap = {(send.mailbox, send.local_day): send.cap for send in result.log.sends}
    counted = at_cap = 0
    caps_of: dict[str, list[int]] = {}
    for mailbox in result.inventory.mailboxes:
        address = mailbox.address.lower()
        caps = caps_of.setdefault(address, [])
        window = windows.get(mailbox.group)
        for day in _whole_days(result, ZoneInfo(mailbox.timezone)):
            if window is not None and day.weekday() not in window.days:
                continue
            key = (address, day.isoformat())
            cap = guard_cap.get(key, result.caps.get(address, {}).get(day.isoformat(), 0))
            if cap <= 0:
                continue
            counted += 1
            at_cap += sent[key] >= cap
            caps.append(cap)
    return counted, at_cap, caps_of


def _campaign_days(result: SimResult) -> tuple[int, int]:
    """(campaign-days counted, of them at the campaign's daily cap), for the campaigns that have one."""
    campaign_of = {row.address: row.campaign for row in result.sequences}
    capped = {spec.name: spec for spec in result.specs if spec.pacing.daily_cap is not None}
    if not capped:
        return 0, 0
    sent: Counter[tuple[str, date]] = Counter()
    for send in result.log.sends:
        spec = capped.get(campaign_of.get(send.address or "", ""))
        if spec is not None:
            sent[(spec.name, datetime.fromtimestamp(send.at, ZoneInfo(spec.pacing.timezone)).date())] += 1
    counted = at_cap = 0
    for spec in capped.values():
        for day in _whole_days(result, ZoneInfo(spec.pacing.timezone)):
            if _closed_all_day(spec, day):
                continue
            counted += 1
            at_cap += sent[(spec.name, day)] >= (spec.pacing.daily_cap or 0)
    return counted, at_cap


def _closed_all_day(spec: CampaignSpec, day: date) -> bool:
    window = spec.pacing.window
    return day in spec.pacing.skip_dates or (window is not None and day.weekday() not in window.days)


def _whole_days(result: SimResult, zone: ZoneInfo) -> list[date]:
    """The local days of `zone` that lay wholly inside the run."""
    day = datetime.fromtimestamp(result.start_s, zone).date()
    days: list[date] = []
    while True:
        start = datetime.combine(day, datetime.min.time(), zone).timestamp()
        end = datetime.combine(day + timedelta(days=1), datetime.min.time(), zone).timestamp()
        if start >= result.end_s:
            return days
        if start >= result.start_s and end <= result.end_s:
            days.append(day)
        day += timedelta(days=1)
