"""Planning a fleet from its leads (warmup.fleet_plan): the sends a day at the steady state, the limit that binds a
mailbox, mailboxes and hosts, and the ramp's day from which the fleet sends it all, each checked by hand."""

from __future__ import annotations

import pytest

from warmup.fleet_plan import Demand, fleet_json, fleet_rows, plan_fleet
from warmup.schedule import Ramp


def test_the_steady_state_sends_every_step_of_every_days_leads_less_those_that_ended() -> None:
    assert Demand(100, 3).sends_per_day == 300
    assert Demand(100, 3, ends_rate=0.1).sends_per_day == pytest.approx(100 * (1 + 0.9 + 0.81))


def test_the_lower_of_the_ramps_ceiling_and_the_providers_daily_limit_binds_a_mailbox() -> None:
    ramp = Ramp()  # ceiling 40
    assert plan_fleet(Demand(100, 3), ramp=ramp, provider="google", provider_limit=2000,
                      mailboxes_per_host=8).binding == "ramp ceiling"
    capped = plan_fleet(Demand(100, 3), ramp=Ramp(ceiling=3000), provider="google", provider_limit=2000,
                        mailboxes_per_host=8)
    assert (capped.per_mailbox, capped.binding, capped.mailboxes) == (2000, "google's daily limit", 1)


def test_mailboxes_hosts_and_the_day_of_full_volume_match_the_hand_calculation() -> None:
    # 300 sends a day at 40 a mailbox: 8 mailboxes, 3 hosts of 3. Their caps: 10 in week one, then 15, 20, ...:
    # 8 x 40 = 320 >= 300 first on day 43 (8 x 35 = 280 on day 36 is short).
    fleet = plan_fleet(Demand(100, 3), ramp=Ramp(), provider="google", provider_limit=2000, mailboxes_per_host=3)
    assert (fleet.sends_per_day, fleet.mailboxes, fleet.hosts, fleet.full_volume_day) == (300, 8, 3, 43)
    # Until then the leads a day it can start: the week's sends / 3 sends a lead.
    assert [(w.day_number, w.sends_per_day, w.leads_per_day) for w in fleet.weeks] == [
        (1, 80, 26), (8, 120, 40), (15, 160, 53), (22, 200, 66), (29, 240, 80), (36, 280, 93)]


def test_a_ramp_that_never_reaches_the_demand_says_so() -> None:
    # A ramp that never steps up stays at 10 a day, while the mailboxes were counted at its ceiling of 40.
    fleet = plan_fleet(Demand(100, 3), ramp=Ramp(step=0), provider="google", provider_limit=2000,
                       mailboxes_per_host=8)
    assert fleet.full_volume_day is None
    rows = {name: value for name, value, _ in fleet_rows(fleet)}
    assert rows["full volume from"] == "not within a year"


def test_a_fleet_at_full_volume_on_its_first_day_has_no_week_short() -> None:
    fleet = plan_fleet(Demand(1, 1), ramp=Ramp(), provider="google", provider_limit=2000, mailboxes_per_host=1)
    assert (fleet.full_volume_day, fleet.weeks) == (1, ())


def test_rows_and_json_name_the_binding_limit_and_the_waiting_leads() -> None:
    fleet = plan_fleet(Demand(100, 3), ramp=Ramp(), provider="microsoft", provider_limit=10_000,
                       mailboxes_per_host=3)
    rows = {name: (value, how) for name, value, how in fleet_rows(fleet)}
    assert rows["sends/mailbox/day"] == ("40", "ramp ceiling binds: ramp ceiling 40, microsoft's limit 10,000")
    assert rows["from day 1"][0] == "26 new leads/day"
    assert "from day 43" not in rows  # full volume: no lead waits
    data = fleet_json(fleet)
    assert (data["mailboxes"], data["hosts"], data["full_volume_day"], data["binding"]) == (8, 3, 43, "ramp ceiling")


@pytest.mark.parametrize("demand", [
    {"leads_per_day": 0, "steps": 3}, {"leads_per_day": 10, "steps": 0}, {"leads_per_day": 10, "steps": 3,
                                                                          "ends_rate": 1.0}])
def test_nonsense_demand_is_refused(demand: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        Demand(**demand)  # type: ignore[arg-type]
