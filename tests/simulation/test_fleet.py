"""`sendhost simulate --hosts N --mailboxes M`: the example scaled to a fleet, and the summary's fleet section."""

from __future__ import annotations

import contextlib
import ipaddress
import json
from collections import Counter
from pathlib import Path

import pytest
import redis

from sender.ledger import connection as db
from simulation.fleet import (
    MAX_HOSTS,
    MAX_MAILBOXES_PER_DOMAIN,
    ConnectionMeter,
    ConnectionUse,
    FleetSize,
    fleet_section,
    scale_inventory,
)
from simulation.mail import embedded_ledger
from simulation.model import SimInventory
from simulation.moto_world import slot_private_ips
from tests.conftest import run_cli
from toolkit.cli.simulate import example_inventory, to_sim_inventory
from toolkit.inventory import load_inventory


def _example() -> SimInventory:
    return to_sim_inventory(load_inventory(example_inventory()))


def test_the_fleet_keeps_the_inventorys_own_hosts_and_mailboxes_first_and_spreads_the_rest() -> None:
    example = _example()
    fleet = scale_inventory(example, FleetSize(hosts=7, mailboxes=41))
    assert fleet.hosts[:2] == example.hosts and fleet.mailboxes[:3] == example.mailboxes
    assert fleet.domains == example.domains and fleet.region == example.region
    assert len(fleet.hosts) == 7 and len({h.name for h in fleet.hosts}) == 7
    # Each generated host copies the pool policy of the inventory's hosts in turn, on a subnet of its own.
    assert [h.pool.slots for h in fleet.hosts] == [2, 3, 2, 3, 2, 3, 2]
    networks = [ipaddress.IPv4Network(h.subnet or f"{h.primary_ip}/24", strict=False) for h in fleet.hosts]
    assert not any(a.overlaps(b) for i, a in enumerate(networks) for b in networks[i + 1:])
    for host in fleet.hosts[2:]:
        assert all(ipaddress.IPv4Address(ip) in ipaddress.IPv4Network(host.subnet or "") for ip in
                   slot_private_ips(host))
    assert len({m.address for m in fleet.mailboxes}) == 41
    per_domain = Counter(m.domain for m in fleet.mailboxes)
    assert per_domain == {"example.com": 21, "example.org": 20}  # the example's 2 + 1, then evenly
    templates = {(m.group, m.timezone, m.start) for m in example.mailboxes}
    assert {(m.group, m.timezone, m.start) for m in fleet.mailboxes} == templates
    # The run starts on the latest mailbox start: the same day as the example's own run.
    assert max(m.start for m in fleet.mailboxes) == max(m.start for m in example.mailboxes)
    assert scale_inventory(example, FleetSize(hosts=7, mailboxes=41)) == fleet  # the same options, the same fleet


def test_fewer_than_the_inventory_has_takes_the_first() -> None:
    example = _example()
    fleet = scale_inventory(example, FleetSize(hosts=1, mailboxes=2))
    assert fleet.hosts == example.hosts[:1] and fleet.mailboxes == example.mailboxes[:2]
    assert scale_inventory(example, FleetSize()) == example


def test_the_section_folds_sends_per_host_and_counts_idle_hosts() -> None:
    fleet = scale_inventory(_example(), FleetSize(hosts=8))
    names = [h.name for h in fleet.hosts]
    sends = [names[0]] * 5 + [names[3]] * 2 + [names[5]] * 9 + [names[6]]
    section = fleet_section(fleet, sends, workers=16, connections=ConnectionUse(postgres_peak=1, samples=3))
    assert section.per_host == {name: sends.count(name) for name in names}
    assert (section.sends, section.sends_min, section.sends_median, section.sends_max) == (17, 0, 0.5, 9)
    assert section.idle_hosts == 4
    assert section.top == [(names[5], 9), (names[0], 5), (names[3], 2), (names[6], 1), (names[1], 0)]
    assert section.to_json()["sends_per_host"]["per_host"] == section.per_host


@pytest.mark.parametrize(("args", "message"), [
    (["--hosts", "0"], f"error: --hosts 0: simulate 1 to {MAX_HOSTS} hosts, e.g. --hosts 50"),
    (["--hosts", "-4"], f"error: --hosts -4: simulate 1 to {MAX_HOSTS} hosts, e.g. --hosts 50"),
    (["--hosts", str(MAX_HOSTS + 1)], f"error: --hosts {MAX_HOSTS + 1}: simulate 1 to {MAX_HOSTS} hosts"),
    (["--mailboxes", "0"], "error: --mailboxes 0: simulate at least 1 mailbox, e.g. --mailboxes 400"),
    (["--mailboxes", "-1"], "error: --mailboxes -1: simulate at least 1 mailbox"),
    (["--mailboxes", str(2 * MAX_MAILBOXES_PER_DOMAIN + 1)],
     f"error: --mailboxes {2 * MAX_MAILBOXES_PER_DOMAIN + 1}: the inventory's 2 domains carry at most "
     f"{2 * MAX_MAILBOXES_PER_DOMAIN} ({MAX_MAILBOXES_PER_DOMAIN} each); pass --mailboxes "
     f"{2 * MAX_MAILBOXES_PER_DOMAIN} or fewer, or add domains to sendhost_domains"),
    (["--hosts", "10", "--mailboxes", "10000000"], "error: --mailboxes 10000000: the inventory's 2 domains carry"),
])
def test_bad_sizes_exit_2_with_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    result = run_cli("simulate", *args, cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.startswith(message) and result.stderr.count("\n") == 1, result.stderr
    assert result.stdout == ""


@pytest.mark.slow
@pytest.mark.service
def test_a_fleet_run_shows_sends_per_host_and_the_connections_it_used(tmp_path: Path) -> None:
    result = run_cli("simulate", "--hosts", "6", "--mailboxes", "40", "--days", "1", "--format", "json",
                     cwd=tmp_path, timeout=600)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    fleet = data["fleet"]
    assert (fleet["hosts"], fleet["slots"], fleet["mailboxes"], fleet["workers"]) == (6, 15, 40, 12)
    per_host = fleet["sends_per_host"]["per_host"]
    assert list(per_host) == ["sender-1", "sender-2", "fleet-003", "fleet-004", "fleet-005", "fleet-006"]
    assert sum(per_host.values()) == fleet["sends_per_host"]["total"] == data["sends"]["total"] > 0
    assert fleet["sends_per_host"]["max"] == max(per_host.values())
    # The sends went out from more than the example's own two hosts, through the generated ones too.
    assert sum(1 for name, sends in per_host.items() if sends and name.startswith("fleet-")) >= 1
    assert len(data["mailboxes"]) == 40
    # What bound the fleet's run, read from its own caps and sends: forty mailboxes' caps are far above one day's
    # leads, so not they (the fleet table's first row says the same words).
    assert data["bound"]["limit"] != "mailbox-caps" and data["bound"]["mailboxes"] == 40
    assert data["bound"]["text"].startswith(f"{data['sends']['total']} sends a day")
    use = fleet["connections"]
    assert use["samples"] > 0
    # Read from pg_stat_activity and INFO clients during the run: the run's own connections, within the servers'.
    assert 0 < use["postgres_peak"] <= use["postgres_max"]
    assert 0 < use["redis_peak"] <= use["redis_max"]
    # A row claimed ahead by a send's record is sent by that worker's next look, a send's time later (2 to 12 s
    # here): not after the other workers' looks, which left it `sending` for hours and its lead counted as behind.
    assert 0 < use["claim_wait_max_s"] <= 60


@pytest.mark.service
def test_the_meter_counts_the_client_backends_pg_stat_activity_lists(tmp_path: Path,
                                                                     redis_client: redis.Redis) -> None:
    with embedded_ledger(tmp_path) as url, contextlib.ExitStack() as stack:
        meter = ConnectionMeter(redis_client, url)
        stack.callback(meter.close)
        view = stack.enter_context(contextlib.closing(db.connect(url)))
        view.autocommit = True
        counts = []
        for _ in range(3):
            stack.enter_context(contextlib.closing(db.connect(url)))
            meter.sample()
            # the view, from a connection of its own, leaving that one out as the meter leaves out its own
            listed = view.execute("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' "
                                  "AND pid <> pg_backend_pid()").fetchone()
            assert listed is not None
            counts.append((meter.use.postgres_peak, int(listed[0])))
    assert [peak for peak, _ in counts] == [listed for _, listed in counts] == [2, 3, 4]
    assert meter.use.samples == 3 and meter.use.redis_peak >= 1
