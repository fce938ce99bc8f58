"""`pool plan` arithmetic against a hand calculation."""

from __future__ import annotations

import json
import math

import pytest
from click.testing import CliRunner

from ippool.plan import PlanInput, make_plan
from tests.support.aws import AdapterFactory, StubbedAws
from toolkit.cli import cli


def test_thirty_thousand_sends_a_day_matches_the_hand_calculation() -> None:
    # By hand: mean budget (8 + 15) / 2 = 11.5 sends; 30,000 / 11.5 = 2,608.70 rotations a day.
    # Parked: 2,608.70 x 1.05 draws x 16 min / 1,440 = 30.43 addresses; active 4 x 5 = 20; headroom 20.
    # Needed: 20 + 31 + 20 = 71. Calls per rotation: 2 x 1.05 + 1 = 3.1 -> 8,086.96 a day of 432,000.
    # Cost: (20 + 30.43) x 0.005 x 730 = 50.43 x 3.65 = $184.09 a month.
    plan = make_plan(PlanInput(sends_per_day=30_000, hosts=4, slots_per_host=5), quota=5)
    assert plan.mean_budget == 11.5
    assert plan.rotations_per_day == pytest.approx(2608.6957, abs=1e-3)
    assert plan.parked_eips_steady == pytest.approx(30.4348, abs=1e-3)
    assert plan.active_eips == 20
    assert plan.eips_needed == 71
    assert plan.eip_calls_per_rotation == pytest.approx(3.1)
    assert plan.eip_calls_per_day == pytest.approx(8086.96, abs=0.01)
    assert plan.throttle_capacity_per_day == 432_000
    assert plan.monthly_cost_usd == pytest.approx(184.09, abs=0.01)
    assert plan.quota_increase_to == 71
    assert any("request an increase of L-0263D0A3 to 71" in row[2] for row in plan.explanations())


def test_ptr_adds_two_calls_per_rotation_and_enough_quota_needs_no_increase() -> None:
    plan = make_plan(PlanInput(sends_per_day=1150, hosts=1, slots_per_host=2, ptr=True, redraw_rate=0.0), quota=100)
    assert plan.rotations_per_day == pytest.approx(100)
    assert plan.eip_calls_per_rotation == 5
    assert plan.parked_eips_steady == pytest.approx(100 * 16 / 1440)
    assert plan.eips_needed == 2 + math.ceil(100 * 16 / 1440) + 2
    assert plan.quota_increase_to is None


def test_rejects_nonsense() -> None:
    with pytest.raises(ValueError, match="hosts and slots >= 1"):
        make_plan(PlanInput(sends_per_day=10, hosts=0, slots_per_host=1))


def test_cli_plan_shows_the_hand_calculated_numbers_and_the_quota_to_request(
        monkeypatch: pytest.MonkeyPatch, make_adapter: AdapterFactory, stubbed_aws: StubbedAws) -> None:
    # Service Quotas through the named Stubber fake (moto has no EC2 quotas): the region allows 5 EIPs.
    stubbed_aws.stub("service-quotas").add_response(
        "get_service_quota", {"Quota": {"ServiceCode": "ec2", "QuotaCode": "L-0263D0A3", "Value": 5.0}},
        {"ServiceCode": "ec2", "QuotaCode": "L-0263D0A3"})
    monkeypatch.setattr("toolkit.cli.pool_wiring.make_adapter", lambda app, region=None: make_adapter(stubbed_aws))
    result = CliRunner().invoke(cli, ["pool", "plan", "--sends-per-day", "30000", "--hosts", "4", "--slots", "5",
                                      "--format", "json"], env={"SENDHOST_INVENTORY": ""})
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    rows = {row["name"]: row["value"] for row in data["rows"]}
    assert (rows["rotations/day"], rows["parked EIPs (steady)"], rows["EIPs needed"], rows["EIP calls/day"],
            rows["monthly cost"], rows["EIP quota"]) == ("2,608.7", "30.4", "71", "8,087", "$184.09", "5")
    assert data["summary"] == "71 EIPs needed for 30,000 sends/day; request an increase of ec2/L-0263D0A3 to 71"
    stubbed_aws.assert_all_answered()


def test_cli_plan_takes_the_pool_s_own_redraw_rate(
        monkeypatch: pytest.MonkeyPatch, make_adapter: AdapterFactory, stubbed_aws: StubbedAws) -> None:
    """At 1.15 redraws per rotation (what bench/reuse.py measured when AWS keeps handing addresses back) every
    rotation parks 2.15 addresses and makes 2 x 2.15 + 1 EIP calls."""
    stubbed_aws.stub("service-quotas").add_response(
        "get_service_quota", {"Quota": {"ServiceCode": "ec2", "QuotaCode": "L-0263D0A3", "Value": 500.0}},
        {"ServiceCode": "ec2", "QuotaCode": "L-0263D0A3"})
    monkeypatch.setattr("toolkit.cli.pool_wiring.make_adapter", lambda app, region=None: make_adapter(stubbed_aws))
    result = CliRunner().invoke(cli, ["pool", "plan", "--sends-per-day", "30000", "--hosts", "4", "--slots", "5",
                                      "--redraw-rate", "1.15", "--format", "json"], env={"SENDHOST_INVENTORY": ""})
    assert result.exit_code == 0, result.output
    rows = {row["name"]: row["value"] for row in json.loads(result.output)["rows"]}
    rotations = 30000 / 11.5
    parked = rotations * 2.15 * (15 + 1) / 1440  # 62.3
    assert rows["parked EIPs (steady)"] == f"{parked:,.1f}" == "62.3"
    assert rows["EIPs needed"] == str(20 + math.ceil(parked) + 20) == "103"
    assert rows["EIP calls/day"] == f"{rotations * (2 * 2.15 + 1):,.0f}" == "13,826"
    assert rows["monthly cost"] == f"${(20 + parked) * 0.005 * 730:,.2f}" == "$300.46"


def test_cli_plan_refuses_a_negative_redraw_rate() -> None:
    result = CliRunner().invoke(cli, ["pool", "plan", "--sends-per-day", "10", "--hosts", "1", "--slots", "1",
                                      "--redraw-rate", "-1"], env={"SENDHOST_INVENTORY": ""})
    assert result.exit_code == 2
    assert "--redraw-rate" in result.output
