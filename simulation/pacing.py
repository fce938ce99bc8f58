"""The pacing scenario (issue 25): campaigns held to a sending window and a daily cap, over two weeks in which
Europe's clocks and then the US's go back an hour.

    result = run_simulation(pacing_inventory(inventory), pacing_config(seed=1))

Two mailbox groups, each with its own campaign (the default run's three steps) and two mailboxes: `eu`, whose leads
are in Europe/Berlin, and `us`, whose leads are in America/New_York. Both campaign files say `timezone:
Europe/Berlin` (the campaign's day, on which its cap is counted), a window Monday to Friday 09:00-17:00 and a
`daily_cap`; every lead names its own time zone in its `timezone` column, and the window is read on that zone's
wall clock (the `us` leads' 09:00 is 15:00 in Berlin). Each mailbox's time zone is its leads', so its day (on
which its ramp cap is counted) is theirs too. A list of leads is imported as each campaign starts, more first steps
than the run's weekdays' caps can send, so every weekday has more due than the campaign may send.

The run starts on Wednesday 21 October 2026: Europe/Berlin goes from UTC+2 to UTC+1 on Sunday 25 October and
America/New_York from UTC-4 to UTC-5 on Sunday 1 November, so each zone has weekdays before and after its change
(and a week in which the two zones are five hours apart instead of six) within the 14 days.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import date
from pathlib import Path

from sendhost.model import Mailbox
from simulation.model import CampaignPlan, GroupPlan, SimConfig, SimInventory

START = date(2026, 10, 21)  # a Wednesday
DAYS = 14
CAMPAIGN_TIMEZONE = "Europe/Berlin"
WINDOW_DAYS = (0, 1, 2, 3, 4)  # Monday to Friday, as datetime.weekday() numbers them
WINDOW_HOURS = (9, 17)  # from 09:00 to 17:00 local time
DAILY_CAP = 50
# More first steps than the weekdays' caps can send (10 weekdays x 50): each weekday has more due than its cap.
LIST_SIZE = 600
ZONES = {"eu": "Europe/Berlin", "us": "America/New_York"}  # mailbox group -> its leads' (and mailboxes') zone
# One mailbox at the ramp's ceiling (40 a day), one still ramping (20 a day in the first week, then 25): together
# more than the campaign's cap, so the campaign's cap is the one that ends each weekday's sending.
MAILBOX_STARTS = (date(2026, 6, 1), date(2026, 10, 5))
PACING_KEYS = f"""\
timezone: {CAMPAIGN_TIMEZONE}   # the campaign's day; each lead's window is read in its own timezone column
window: {{days: [mon, tue, wed, thu, fri], hours: ["{WINDOW_HOURS[0]:02d}:00-{WINDOW_HOURS[1]:02d}:00"]}}
daily_cap: {DAILY_CAP}
"""


def pacing_mailboxes(domains: tuple[str, ...]) -> tuple[Mailbox, ...]:
    """Two mailboxes per group, `eu1@<first domain>`, `eu2@...`, `us1@<last domain>`..., in their leads' zone."""
    mailboxes = []
    for index, (group, zone) in enumerate(ZONES.items()):
        domain = domains[min(index, len(domains) - 1)] if domains else "example.com"
        for number, start in enumerate(MAILBOX_STARTS, start=1):
            mailboxes.append(Mailbox(f"{group}{number}@{domain}", domain, start, zone, group))
    return tuple(mailboxes)


def pacing_inventory(base: SimInventory) -> SimInventory:
    """`base`'s hosts and domains, with the scenario's mailboxes instead of its own."""
    return replace(base, mailboxes=pacing_mailboxes(tuple(d.name for d in base.domains)))


def pacing_config(seed: int = 1, days: int = DAYS, sends_per_day: int = 0, zone_dir: Path | None = None) -> SimConfig:
    """The scenario's run: from START, the campaigns' lists imported at the start (`sends_per_day` more leads may
    come in each day as in the default run, none by default)."""
    plan = CampaignPlan(tuple(GroupPlan(group, PACING_KEYS, zone, LIST_SIZE) for group, zone in ZONES.items()))
    return SimConfig(days=days, sends_per_day=sends_per_day, seed=seed, start=START, zone_dir=zone_dir,
                     campaign=plan)
