"""A campaign's sending window as data the claim reads: the instants it is open, per lead time zone (issue 44).

The claim (sender_claim in sql/schema.sql) takes a row of a campaign with a window only at an instant inside one of
its lead's intervals (sender_window_intervals), so no row outside its window is ever claimed and given back. The
window's rules stay in one place, sender.campaigns.window.Schedule (`open_intervals`, read by `is_open` alone: DST
gaps and repeats, skip dates, the lead's zone else the campaign's); this module writes what it says for HORIZON
ahead of the ledger's clock:
- when a campaign is applied (`Campaigns.apply`, in the apply's transaction: a new file's window and the file
  are seen together) and when leads are added (a new lead time zone gets its intervals with its leads);
- each sweep cycle of the agent (`sweep`: `extend`), for every zone known less than EXTEND_BEFORE ahead, so the
  intervals never run out while an agent runs, and for a file applied without them (a ledger migrated to version 21).
The sweep cycle also moves each due row of a window closed now to wait (not_before) until it opens (`defer`), so the
claim's index passes it over instead of each claim looking it up again (sender_window_defer).
A campaign with no window and no skip dates is `always_open` (no interval read). A file that no longer parses has
no intervals at all: its rows are not claimed (fail closed) until it is applied again.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

import psycopg

from sender.campaigns.spec import load_applied
from sender.campaigns.window import Schedule, zone
from sender.ledger import connection as db
from sender.ledger.queries import query
from sender.ledger.store import Ledger
from sendhost.errors import ConfigError

log = logging.getLogger("sendhost.sender")

HORIZON = timedelta(days=14)  # how far ahead of the clock a zone's intervals are written
EXTEND_BEFORE = timedelta(days=13)  # a zone known less far ahead than this is extended (each sweep cycle looks)
KEEP = timedelta(days=1)  # intervals closed longer ago than this are dropped; a zone is written from this far back


def write(conn: psycopg.Connection, name: str, now: datetime) -> bool:
    """Bring campaign `name`'s intervals up to date at `now`, inside the caller's transaction (its statement timeout
    set): written anew when the
    file changed since they were written, each zone extended when known less than EXTEND_BEFORE ahead, a new lead
    zone written. False when no campaign file has that name."""
    row = conn.execute(query("window_campaign"), {"name": name}).fetchone()
    if row is None:
        return False
    campaign_id, source, source_hash, written_hash = row
    if written_hash != source_hash:
        conn.execute(query("window_forget"), {"id": campaign_id})
    try:
        spec = load_applied(name, source)
    except ConfigError as exc:
        # Fail closed: a file valid when applied that no longer parses must not send around its window.
        log.error("sender: %s; its rows are not claimed until it is applied again", exc)
        conn.execute(query("window_forget"), {"id": campaign_id})
        conn.execute(query("window_mark"), {"id": campaign_id, "always_open": False, "hash": source_hash})
        return True
    schedule = Schedule.of(spec.pacing)
    conn.execute(query("window_mark"), {"id": campaign_id, "always_open": schedule is None,
                                            "hash": source_hash})
    if schedule is None:
        return True
    known: dict[str, datetime] = {str(z): at for z, at in conn.execute(query("window_horizons"),
                                                                        {"id": campaign_id}).fetchall()}
    zones = [str(z) for (z,) in conn.execute(query("window_zones"), {"id": campaign_id}).fetchall()]
    until = now + HORIZON
    for lead_zone in sorted(zones):
        known_until = known.get(lead_zone)
        if known_until is not None and known_until >= now + EXTEND_BEFORE:
            continue
        start = now - KEEP if known_until is None else max(known_until, now - KEEP)
        intervals = schedule.open_intervals(start, until, zone(lead_zone or None, spec.pacing.timezone))
        conn.execute(query("window_write"), {
            "id": campaign_id, "zone": lead_zone, "opens": [o for o, _ in intervals],
            "closes": [c for _, c in intervals], "until": until, "before": now - KEEP})
    return True


def extend(ledger: Ledger) -> int:
    """The agent's sweep cycle: write the intervals of every campaign that needs it, each in its own transaction;
    how many campaigns were written."""
    now = ledger.now() or datetime.now(UTC)
    stale = [str(name) for (name,) in ledger.fetch_all("window_stale", {"soon": now + EXTEND_BEFORE},
                                                       "campaigns' windows ahead")]
    for name in stale:
        with ledger.calling(f"write the sending window of campaign {name}") as conn, db.transaction(conn):
            db.set_local_timeout(conn)
            write(conn, name, now)
    return len(stale)


def defer(ledger: Ledger) -> int:
    """Each due row of a window closed now waits until the window opens (sender_window_defer); how many."""
    return int(ledger.fetch_value("window_defer", {}, "rows waiting for their window"))


def sweep(ledger: Ledger) -> tuple[int, int]:
    """The agent's sweep cycle: (campaigns whose intervals were written, rows moved to their window's opening)."""
    return extend(ledger), defer(ledger)
