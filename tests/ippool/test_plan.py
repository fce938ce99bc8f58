"""`pool plan` arithmetic against a hand calculation: hosts as they are, remaps, regions, JSON numbers."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from ippool.plan import (
    HostLoad,
    PlanInput,
    Prices,
    explanations,
    inventory_hosts,
    make_plan,
    to_json,
    uniform_hosts,
)
from tests.conftest import run_cli
from tests.support.aws import AdapterFactory, StubbedAws
from toolkit.cli import cli

DAYS_PER_MONTH = 730 / 24


def stub_quota(fake: StubbedAws, value: float) -> None:
    fake.stub("service-quotas").add_response(
        "get_service_quota", {"Quota": {"ServiceCode": "ec2", "QuotaCode": "L-0263D0A3", "Value": value}},
        {"ServiceCode": "ec2", "QuotaCode": "L-0263D0A3"})


def test_thirty_thousand_sends_a_day_matches_the_hand_calculation() -> None:
    # By hand: mean budget (8 + 15) / 2 = 11.5 sends; 30,000 / 11.5 = 2,608.70 rotations a day.
    # Parked: 2,608.70 x 1.05 draws x 16 min / 1,440 = 30.43 addresses; active 4 x 5 = 20; headroom 20.
    # Needed: 20 + 31 + 20 = 71. Calls per rotation: 2 x 1.05 + 1 = 3.1 -> 8,086.96 a day of 432,000.
    # IPv4: (20 + 30.43) x 0.005 x 730 = 50.43 x 3.65 = $184.09 a month.
    # Remaps: one per rotation, 2,608.70 x 30.4167 days = 79,347.8 a month; (79,347.8 - 100) x $0.10 = $7,924.78.
    plan = make_plan(PlanInput(sends_per_day=30_000, hosts=uniform_hosts(4, 5)), quotas={"us-east-1": 5})
    assert plan.mean_budget == 11.5
    assert plan.rotations_per_day == pytest.approx(2608.6957, abs=1e-3)
    assert plan.parked_eips_steady == pytest.approx(30.4348, abs=1e-3)
    assert plan.active_eips == 20
    assert plan.eips_needed == 71
    assert plan.eip_calls_per_day == pytest.approx(8086.96, abs=0.01)
    assert plan.ipv4_cost_usd == pytest.approx(184.09, abs=0.01)
    assert plan.remaps_per_month == pytest.approx(79_347.83, abs=0.01)
    assert plan.remap_cost_usd == pytest.approx(7_924.78, abs=0.01)
    assert plan.monthly_cost_usd == pytest.approx(184.09 + 7_924.78, abs=0.01)
    assert plan.remap_cost_usd > 40 * plan.ipv4_cost_usd  # the line that dominates the bill
    [region] = plan.regions
    assert region.quota_increase_to == 71
    assert region.throttle_share == pytest.approx(8086.96 / 432_000, abs=1e-6)
    assert any("request an increase of L-0263D0A3 to 71" in row[2] for row in explanations(plan))


def test_the_budget_range_bounds_the_remap_bill() -> None:
    # Every address retiring after 8 sends: 3,750 rotations a day; after 15: 2,000.
    plan = make_plan(PlanInput(sends_per_day=30_000, hosts=uniform_hosts(4, 5)))
    assert plan.remap_cost_at_low_budget_usd == pytest.approx((3750 * DAYS_PER_MONTH - 100) * 0.10)  # $11,396.25
    assert plan.remap_cost_at_high_budget_usd == pytest.approx((2000 * DAYS_PER_MONTH - 100) * 0.10)  # $6,073.33
    assert plan.remap_cost_at_high_budget_usd < plan.remap_cost_usd < plan.remap_cost_at_low_budget_usd
    rows = {name: value for name, value, _ in explanations(plan)}
    assert rows["remap cost by budget"] == "$11,396.25 .. $6,073.33"


def test_remap_price_and_free_remaps_are_settings() -> None:
    hosts = uniform_hosts(1, 2)
    cheap = make_plan(PlanInput(sends_per_day=115, hosts=hosts, prices=Prices(remap_usd=0.05)))
    free_tier = make_plan(PlanInput(sends_per_day=115, hosts=hosts, prices=Prices(free_remaps_per_month=1000)))
    # 10 rotations a day = 304.17 remaps a month
    assert cheap.remap_cost_usd == pytest.approx((10 * DAYS_PER_MONTH - 100) * 0.05)
    assert free_tier.remap_cost_usd == 0.0  # under the free remaps, nothing is billed


def test_hosts_are_summed_as_they_are_not_as_copies_of_the_first() -> None:
    # 2 + 3 slots (the example inventory) is 5 active addresses; sends split 2:3 across the hosts.
    small = HostLoad("sender-1", 2, budget=(8, 15), park_minutes=15)
    large = HostLoad("sender-2", 3, budget=(20, 30), park_minutes=60, ptr=True)
    plan = make_plan(PlanInput(sends_per_day=1000, hosts=(small, large), redraw_rate=0.0))

    assert plan.active_eips == 5
    first, second = plan.hosts
    assert (first.sends_per_day, second.sends_per_day) == (400, 600)
    assert first.rotations_per_day == pytest.approx(400 / 11.5)
    assert second.rotations_per_day == pytest.approx(600 / 25)
    assert first.parked_eips_steady == pytest.approx(400 / 11.5 * 16 / 1440)
    assert second.parked_eips_steady == pytest.approx(600 / 25 * 61 / 1440)  # its own park minutes
    assert plan.eip_calls_per_day == pytest.approx(400 / 11.5 * 3 + 600 / 25 * 5)  # PTR on the second only
    assert plan.eips_needed == 5 + math.ceil(first.parked_eips_steady + second.parked_eips_steady) + 5


def test_each_region_has_its_own_quota_throttle_and_free_remaps() -> None:
    east = HostLoad("sender-1", 2, region="us-east-1")
    west = HostLoad("sender-2", 2, region="eu-west-1")
    plan = make_plan(PlanInput(sends_per_day=2300, hosts=(east, west), redraw_rate=0.0),
                     quotas={"us-east-1": 100, "eu-west-1": 5})

    assert [r.region for r in plan.regions] == ["eu-west-1", "us-east-1"]
    west_plan, east_plan = plan.regions
    # each region: 1,150 sends / 11.5 = 100 rotations a day, 3,041.7 remaps a month, 100 of them free
    assert west_plan.remap_cost_usd == east_plan.remap_cost_usd == pytest.approx((100 * DAYS_PER_MONTH - 100) * 0.1)
    assert west_plan.eips_needed == 2 + math.ceil(100 * 16 / 1440) + 2 == 6
    assert (west_plan.quota_increase_to, east_plan.quota_increase_to) == (6, None)
    assert east_plan.eip_calls_per_day == pytest.approx(300)


def test_json_carries_numbers() -> None:
    data = to_json(make_plan(PlanInput(sends_per_day=30_000, hosts=uniform_hosts(4, 5)), {"us-east-1": 5}))
    assert data["rotations_per_day"] == 2608.7
    assert data["eips_needed"] == 71
    assert data["cost_usd_per_month"] == {"ipv4": 184.09, "remaps": 7924.78, "total": 8108.87,
                                          "remaps_at_low_budget": 11396.25, "remaps_at_high_budget": 6073.33}
    assert data["assumptions"]["remap_usd"] == 0.10
    assert data["assumptions"]["free_remaps_per_month"] == 100
    assert data["regions"][0]["quota_increase_to"] == 71


@pytest.mark.parametrize("inputs", [
    PlanInput(sends_per_day=10, hosts=()),
    PlanInput(sends_per_day=10, hosts=(HostLoad("h", 0),)),
    PlanInput(sends_per_day=10, hosts=uniform_hosts(1, 1), prices=Prices(remap_usd=-1)),
])
def test_rejects_nonsense(inputs: PlanInput) -> None:
    with pytest.raises(ValueError, match=">= "):
        make_plan(inputs)


def test_cli_plan_shows_the_hand_calculated_numbers_and_the_quota_to_request(
        monkeypatch: pytest.MonkeyPatch, make_adapter: AdapterFactory, stubbed_aws: StubbedAws) -> None:
    # Service Quotas through the named Stubber fake (moto has no EC2 quotas): the region allows 5 EIPs.
    stub_quota(stubbed_aws, 5.0)
    monkeypatch.setattr("toolkit.cli.pool_wiring.make_adapter", lambda app, region=None: make_adapter(stubbed_aws))
    result = CliRunner().invoke(cli, ["pool", "plan", "--sends-per-day", "30000", "--hosts", "4", "--slots", "5",
                                      "--format", "json"], env={"SENDHOST_INVENTORY": ""})
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    rows = {row["name"]: row["value"] for row in data["rows"]}
    assert (rows["rotations/day"], rows["parked EIPs (steady)"], rows["EIPs needed"], rows["EIP calls/day"],
            rows["IPv4 cost/month"], rows["remap cost/month"], rows["monthly cost"],
            rows["us-east-1: EIP quota"]) == ("2,608.7", "30.4", "71", "8,087", "$184.09", "$7,924.78",
                                              "$8,108.87", "5")
    assert (data["rotations_per_day"], data["eips_needed"]) == (2608.7, 71)
    assert data["summary"] == ("71 EIPs needed for 30,000 sends/day, $8,108.87/month (remaps $7,924.78); "
                               "request an increase of ec2/L-0263D0A3 in us-east-1 to 71")
    stubbed_aws.assert_all_answered()


def test_cli_plan_takes_the_remap_price_from_a_flag_or_the_environment(
        monkeypatch: pytest.MonkeyPatch, make_adapter: AdapterFactory, stubbed_aws: StubbedAws) -> None:
    stub_quota(stubbed_aws, 500.0)
    stub_quota(stubbed_aws, 500.0)
    monkeypatch.setattr("toolkit.cli.pool_wiring.make_adapter", lambda app, region=None: make_adapter(stubbed_aws))
    args = ["pool", "plan", "--sends-per-day", "30000", "--hosts", "4", "--slots", "5", "--format", "json"]

    flag = CliRunner().invoke(cli, [*args, "--remap-price", "0.2"], env={"SENDHOST_INVENTORY": ""})
    env = CliRunner().invoke(cli, args, env={"SENDHOST_INVENTORY": "", "SENDHOST_EIP_REMAP_USD": "0.2"})

    for result in (flag, env):
        assert result.exit_code == 0, result.output
        data = json.loads(result.output)
        assert data["assumptions"]["remap_usd"] == 0.2
        assert data["cost_usd_per_month"]["remaps"] == 15_849.57  # (79,347.83 - 100) x $0.20


def test_inventory_hosts_are_planned_with_their_own_pool_policies(example_inventory: Path) -> None:
    from toolkit.inventory import load_inventory

    loads = inventory_hosts(load_inventory(example_inventory).hosts)
    assert [(h.name, h.slots, h.region, h.budget, h.park_minutes, h.ptr) for h in loads] == [
        ("sender-1", 2, "us-east-1", (8, 15), 15, False), ("sender-2", 3, "us-east-1", (8, 15), 15, True)]


def test_cli_plan_sums_the_example_inventorys_hosts(
        monkeypatch: pytest.MonkeyPatch, make_adapter: AdapterFactory, stubbed_aws: StubbedAws,
        example_inventory: Path) -> None:
    stub_quota(stubbed_aws, 5.0)
    monkeypatch.setattr("toolkit.cli.pool_wiring.make_adapter", lambda app, region=None: make_adapter(stubbed_aws))
    result = CliRunner().invoke(cli, ["--inventory", str(example_inventory), "pool", "plan", "--sends-per-day",
                                      "1150", "--format", "json"], env={"SENDHOST_INVENTORY": ""})

    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["active_eips"] == 5  # 2 + 3 slots, not 2 hosts x the first host's 2
    assert [(h["host"], h["slots"], h["ptr"]) for h in data["hosts"]] == [("sender-1", 2, False),
                                                                          ("sender-2", 3, True)]
    # 1,150 sends split 2:3 = 460 + 690; 40 + 60 rotations; PTR adds 2 calls on sender-2's 60 only
    assert data["eip_calls_per_day"] == pytest.approx(40 * 3.1 + 60 * 5.1, abs=0.1)


def test_cli_plan_checks_the_quota_of_every_region(
        monkeypatch: pytest.MonkeyPatch, make_adapter: AdapterFactory, tmp_path: Path,
        example_inventory: Path) -> None:
    inventory = yaml.safe_load(example_inventory.read_text())
    inventory["all"]["children"]["senders"]["hosts"]["sender-2"]["sendhost_region"] = "eu-west-1"
    path = tmp_path / "inventory.yml"
    path.write_text(yaml.safe_dump(inventory))
    fakes = {"us-east-1": StubbedAws("us-east-1"), "eu-west-1": StubbedAws("eu-west-1")}
    stub_quota(fakes["us-east-1"], 100.0)
    stub_quota(fakes["eu-west-1"], 5.0)
    asked: list[str | None] = []

    def adapter_for(app: object, region: str | None = None) -> object:
        asked.append(region)
        return make_adapter(fakes[region or ""])

    monkeypatch.setattr("toolkit.cli.pool_wiring.make_adapter", adapter_for)
    try:
        result = CliRunner().invoke(cli, ["--inventory", str(path), "pool", "plan", "--sends-per-day", "1150",
                                          "--format", "json"], env={"SENDHOST_INVENTORY": ""})
        assert result.exit_code == 0, result.output
        for fake in fakes.values():
            fake.assert_all_answered()
    finally:
        for fake in fakes.values():
            fake.close()
    data = json.loads(result.output)
    assert sorted(asked, key=str) == ["eu-west-1", "us-east-1"]
    regions = {r["region"]: r for r in data["regions"]}
    assert (regions["us-east-1"]["quota"], regions["us-east-1"]["quota_increase_to"]) == (100, None)
    assert regions["eu-west-1"]["quota"] == 5
    assert regions["eu-west-1"]["quota_increase_to"] == regions["eu-west-1"]["eips_needed"] == 3 + 1 + 3
    assert "request an increase of ec2/L-0263D0A3 in eu-west-1 to 7" in data["summary"]


def test_cli_plan_takes_the_pool_s_own_redraw_rate(
        monkeypatch: pytest.MonkeyPatch, make_adapter: AdapterFactory, stubbed_aws: StubbedAws) -> None:
    """At 1.15 redraws per rotation (what bench/reuse.py measured when AWS keeps handing addresses back) every
    rotation parks 2.15 addresses and makes 2 x 2.15 + 1 EIP calls; redrawn addresses are never associated, so
    the remaps stay one per rotation."""
    stub_quota(stubbed_aws, 500.0)
    monkeypatch.setattr("toolkit.cli.pool_wiring.make_adapter", lambda app, region=None: make_adapter(stubbed_aws))
    result = CliRunner().invoke(cli, ["pool", "plan", "--sends-per-day", "30000", "--hosts", "4", "--slots", "5",
                                      "--redraw-rate", "1.15", "--format", "json"], env={"SENDHOST_INVENTORY": ""})
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    rows = {row["name"]: row["value"] for row in data["rows"]}
    rotations = 30000 / 11.5
    parked = rotations * 2.15 * (15 + 1) / 1440  # 62.3
    assert rows["parked EIPs (steady)"] == f"{parked:,.1f}" == "62.3"
    assert rows["EIPs needed"] == str(20 + math.ceil(parked) + 20) == "103"
    assert rows["EIP calls/day"] == f"{rotations * (2 * 2.15 + 1):,.0f}" == "13,826"
    assert rows["IPv4 cost/month"] == f"${(20 + parked) * 0.005 * 730:,.2f}" == "$300.46"
    assert data["cost_usd_per_month"]["remaps"] == 7924.78


@pytest.mark.parametrize(("args", "named"), [
    (["--hosts", "1", "--slots", "1", "--redraw-rate", "-1"], "--redraw-rate"),
    (["--hosts", "1", "--slots", "1", "--remap-price", "-0.1"], "--remap-price"),
    (["--hosts", "2"], "--hosts and --slots together"),
])
def test_cli_plan_refuses_bad_input_naming_it(args: list[str], named: str) -> None:
    result = run_cli("pool", "plan", "--sends-per-day", "10", *args, env={"SENDHOST_INVENTORY": ""})
    assert result.returncode == 2
    assert named in result.stderr
    assert "Traceback" not in result.stderr


def test_cli_plan_from_leads_plans_the_fleet_then_its_pool(
        monkeypatch: pytest.MonkeyPatch, make_adapter: AdapterFactory, stubbed_aws: StubbedAws) -> None:
    stub_quota(stubbed_aws, 500.0)
    monkeypatch.setattr("toolkit.cli.pool_wiring.make_adapter", lambda app, region=None: make_adapter(stubbed_aws))
    result = CliRunner().invoke(cli, ["pool", "plan", "--leads-per-day", "100", "--steps", "3",
                                      "--mailboxes-per-host", "3", "--slots", "2", "--format", "json"],
                                env={"SENDHOST_INVENTORY": ""})
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    # 300 sends a day at the ramp's ceiling of 40: 8 mailboxes on 3 hosts, whose pool is then planned for 300.
    assert (data["fleet"]["mailboxes"], data["fleet"]["hosts"], data["fleet"]["full_volume_day"]) == (8, 3, 43)
    assert (data["sends_per_day"], data["active_eips"]) == (300, 3 * 2)
    assert data["summary"].startswith("8 mailboxes on 3 hosts for 100 new leads/day, all of them from day 43; ")
    assert (data["fleet"]["sends_per_mailbox"], data["fleet"]["binding"]) == (40, "ramp ceiling")
    assert data["fleet"]["weeks"][0] == {"day": 1, "sends_per_day": 80, "leads_per_day": 26}
    stubbed_aws.assert_all_answered()


@pytest.mark.parametrize(("args", "named"), [
    ([], "--sends-per-day N"),
    (["--sends-per-day", "10", "--leads-per-day", "10"], "--leads-per-day N"),
    (["--leads-per-day", "10", "--hosts", "2", "--slots", "1"], "leave out --hosts"),
    (["--leads-per-day", "10", "--reply-rate", "1"], "--reply-rate"),
])
def test_cli_plan_refuses_a_volume_and_leads_together_or_neither(args: list[str], named: str) -> None:
    result = run_cli("pool", "plan", *args, env={"SENDHOST_INVENTORY": ""})
    assert result.returncode == 2, result.stdout
    assert named in result.stderr
    assert "Traceback" not in result.stderr
