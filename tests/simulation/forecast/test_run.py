"""Issue 43's must-hold: a campaign's forecast matches what the run then sends, per day within ±5% or ±2 sends,
across a DST change and a cap edit mid-run.

The pacing scenario (simulation.pacing): two campaigns held to a Monday-to-Friday 09:00-17:00 window on each lead's
own clock (Europe/Berlin, America/New_York) and a daily cap, over 14 days in which both zones' clocks go back an
hour. Nobody answers, so a forecast with no replies is the run's own future. Each campaign is forecast at the start,
after its list was imported; on day 8 the `eu` campaign's file is applied again with a lower daily cap, and each
campaign is forecast again then. Each forecast is compared with the sends the run's event log holds, counted per
day on the campaign's clock by this test, not by the code under test.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from sender.ledger.campaigns import Campaigns
from simulation import SimResult, run_simulation
from simulation.campaign import campaign_name, campaign_spec
from simulation.forecast import Forecast, Limit, Sources, forecast_all
from simulation.interventions import Intervention, RunParts
from simulation.model import Reactions
from simulation.pacing import CAMPAIGN_TIMEZONE, DAILY_CAP, PACING_KEYS, pacing_config, pacing_inventory
from toolkit.cli.simulate import example_inventory, to_sim_inventory
from toolkit.inventory import load_inventory

pytestmark = [pytest.mark.slow, pytest.mark.service]

DAYS = 14
EDIT_AT_S = 7 * 86_400.0 + 3600.0  # Wednesday 28 October, 01:00 UTC: after both campaigns' day 7
NEW_CAP = 30
NOBODY_ANSWERS = Reactions(bounce=0.0, reply=(0.0,), unsubscribe=(0.0,), away=(0.0,), stop=(0.0,), click=(0.0,),
                           scanned=0.0)


@dataclass
class Forecasts:
    """What the test's interventions saw: each campaign's forecast at the start and after the edit, and whether a
    forecast changed the run's ledger or guard."""

    at_start: dict[str, Forecast] = field(default_factory=dict)
    after_edit: dict[str, Forecast] = field(default_factory=dict)
    edit_day: date | None = None
    untouched: list[bool] = field(default_factory=list)


def _state(parts: RunParts) -> tuple[object, ...]:
    """The run's ledger rows by status and due time, and its guard's keys and counts: what a forecast must not
    change."""
    with parts.ledger.calling("the test's read") as conn:
        rows = conn.execute("SELECT id, status::text, due_at, not_before FROM sender_emails ORDER BY id").fetchall()
    keys = sorted((key, parts.redis.type(key)) for key in parts.redis.scan_iter(match="sendhost:warmup*"))
    counts = [parts.redis.hgetall(key) for key, kind in keys if kind == "hash"]
    return tuple(rows), tuple(keys), tuple(str(sorted(c.items())) for c in counts)


def _forecast_all(parts: RunParts, into: dict[str, Forecast], seen: Forecasts) -> None:
    before = _state(parts)
    into.update(forecast_all([spec.name for spec in parts.specs.values()], Sources(parts.ledger_url, parts.redis),
                             parts.mailboxes, now_s=parts.clock(), days=DAYS))
    seen.untouched.append(_state(parts) == before)


def _lower_cap(parts: RunParts, seen: Forecasts) -> None:
    spec, text = campaign_spec("eu", sorted(parts.specs), PACING_KEYS.replace(f"daily_cap: {DAILY_CAP}",
                                                                             f"daily_cap: {NEW_CAP}"))
    assert spec.pacing.daily_cap == NEW_CAP
    Campaigns(parts.ledger).apply(spec, text)
    seen.edit_day = datetime.fromtimestamp(parts.clock(), ZoneInfo(CAMPAIGN_TIMEZONE)).date()
    _forecast_all(parts, seen.after_edit, seen)


@pytest.fixture(scope="module")
def run() -> tuple[SimResult, Forecasts]:
    seen = Forecasts()
    inventory = pacing_inventory(to_sim_inventory(load_inventory(example_inventory())))
    config = replace(pacing_config(seed=1, days=DAYS), reactions=NOBODY_ANSWERS,
                     interventions=(Intervention(1.0, lambda parts: _forecast_all(parts, seen.at_start, seen)),
                                    Intervention(EDIT_AT_S, lambda parts: _lower_cap(parts, seen))))
    return run_simulation(inventory, config), seen


def _sent_per_day(result: SimResult) -> Counter[tuple[str, date]]:
    """The run's sends per (campaign, day on the campaign's clock), from its event log."""
    group_of = {m.address.lower(): m.group for m in result.inventory.mailboxes}
    tz = ZoneInfo(CAMPAIGN_TIMEZONE)
    return Counter((campaign_name(group_of[send.mailbox.lower()]), datetime.fromtimestamp(send.at, tz).date())
                   for send in result.log.sends)


def _close(forecast_sends: int, sent: int) -> bool:
    return abs(forecast_sends - sent) <= max(2, 0.05 * sent)


def test_forecast_at_the_start_matches_the_run_until_the_cap_edit(run: tuple[SimResult, Forecasts]) -> None:
    result, seen = run
    sent = _sent_per_day(result)
    assert seen.edit_day is not None and set(seen.at_start) == {campaign_name("eu"), campaign_name("us")}
    compared = 0
    for name, found in seen.at_start.items():
        for day in found.days:
            if day.day >= seen.edit_day:
                continue
            assert _close(day.sends, sent[(name, day.day)]), (name, day.day, day.sends, sent[(name, day.day)])
            compared += sent[(name, day.day)]
    # the days compared hold both zones' DST changes (25 October, 1 November: the us campaign's Monday after)
    assert compared >= 2 * 5 * DAILY_CAP * 0.9


def test_forecast_after_the_cap_edit_matches_the_rest_of_the_run(run: tuple[SimResult, Forecasts]) -> None:
    result, seen = run
    sent = _sent_per_day(result)
    edit_day = seen.edit_day
    assert edit_day is not None
    eu = seen.after_edit[campaign_name("eu")]
    for name, found in seen.after_edit.items():
        for day in found.days:
            if day.day < edit_day or day.day >= result.start + timedelta(days=DAYS):
                continue
            assert _close(day.sends, sent[(name, day.day)]), (name, day.day, day.sends, sent[(name, day.day)])
    # the edit is what the forecast after it reads: the eu campaign's weekdays at the new cap, bound by it
    weekdays = [day for day in eu.days if day.sends and day.day > edit_day]
    assert weekdays and all(day.sends == NEW_CAP and day.limit is Limit.CAMPAIGN_CAP for day in weekdays)
    # and the forecast made before it did not know it
    before = seen.at_start[campaign_name("eu")]
    assert any(day.sends == DAILY_CAP for day in before.days if day.day > edit_day)


def test_a_forecast_writes_nothing_the_run_reads(run: tuple[SimResult, Forecasts]) -> None:
    _result, seen = run
    assert seen.untouched == [True, True]


def test_weekends_are_held_by_the_window_and_the_days_add_up(run: tuple[SimResult, Forecasts]) -> None:
    _result, seen = run
    for found in seen.at_start.values():
        for day in found.days:
            assert sum(day.by_mailbox.values()) == day.sends == day.first_steps + day.follow_ups
            if day.day.weekday() >= 5:
                assert day.sends == 0 and day.limit is Limit.WINDOW, day
