"""The simulation's mail goes through the sender agent's real send path into a real SMTP server (aiosmtpd on
127.0.0.1): checked here from what that server recorded, joined to the simulation's event log by Message-ID."""

from __future__ import annotations

import ipaddress
import json
from collections import Counter
from collections.abc import Callable
from datetime import date
from pathlib import Path

import pytest

from simulation import SimResult
from simulation.mail import LOOPBACK_HOST
from simulation.report_html import render_report
from simulation.summary import summarize
from tests.conftest import run_cli
from tests.simulation.conftest import processes_under
from warmup.schedule import cap_on

SEEDS = (1, 2)
BUDGET_MAX = 15
WEEK_ONE_CAP = 10


@pytest.mark.parametrize("seed", SEEDS)
def test_every_send_reached_the_server_exactly_once_by_message_id(simulate: Callable[..., SimResult],
                                                                  seed: int) -> None:
    result = simulate(seed)
    at_server = Counter(d.message_id for d in result.delivered)
    assert at_server, "the server received nothing"
    assert max(at_server.values()) == 1, [mid for mid, n in at_server.items() if n > 1][:3]
    sent = [s.message_id for s in result.log.sends]
    assert None not in sent
    assert len(sent) == len(set(sent))
    assert set(sent) == set(at_server), "a send the server never saw, or a message nobody sent"


@pytest.mark.parametrize("seed", SEEDS)
def test_each_message_came_from_the_address_its_lease_stands_for(simulate: Callable[..., SimResult],
                                                                seed: int) -> None:
    result = simulate(seed)
    peers = {d.message_id: d.peer for d in result.delivered}
    for send in result.log.sends:
        peer = peers[send.message_id]
        assert peer == send.source_ip, (send, peer)
        assert peer != LOOPBACK_HOST and ipaddress.IPv4Address(peer).is_loopback  # bound, not the default
        source = result.sources[peer]
        assert (source.host, source.public_ip, source.slot, source.generation) == (
            send.host, send.public_ip, send.slot, send.generation)
    assert len(set(peers.values())) > len(result.inventory.hosts), "rotation should show as new source addresses"


@pytest.mark.parametrize("seed", SEEDS)
def test_no_source_address_the_server_saw_carried_more_than_its_budget(simulate: Callable[..., SimResult],
                                                                       seed: int) -> None:
    result = simulate(seed)
    budgets = {(p.host, p.slot, p.generation): p.budget for p in result.log.placements}
    per_peer = Counter(d.peer for d in result.delivered)
    pool_peers = 0
    for peer, delivered in per_peer.items():
        source = result.sources[peer]
        if source.slot is None:
            continue  # a host's primary address: the fallback has no budget
        assert source.generation is not None
        budget = budgets[(source.host, source.slot, source.generation)]
        assert delivered <= budget <= BUDGET_MAX, (source, delivered, budget)
        pool_peers += 1
    assert pool_peers >= 10, "too few pool addresses to say anything"


@pytest.mark.parametrize("seed", SEEDS)
def test_no_mailbox_the_server_authenticated_went_over_its_days_cap(simulate: Callable[..., SimResult],
                                                                    seed: int) -> None:
    result = simulate(seed)
    starts = {m.address.lower(): m.start for m in result.inventory.mailboxes}
    day_of = {s.message_id: s.local_day for s in result.log.sends}
    per_day: Counter[tuple[str, str]] = Counter()
    for delivered in result.delivered:
        assert delivered.login.lower() == delivered.mail_from.lower(), "a mailbox sent as another"
        per_day[(delivered.login.lower(), day_of[delivered.message_id])] += 1
    week_one = 0
    for (mailbox, day), count in per_day.items():
        age = (date.fromisoformat(day) - starts[mailbox]).days
        cap = cap_on(starts[mailbox], date.fromisoformat(day)).cap  # the ramp, computed here
        assert count <= cap, f"{mailbox} delivered {count} on {day} against a cap of {cap}"
        if age < 7:
            assert count <= WEEK_ONE_CAP
            week_one += 1
    # Any seven days hold five weekdays, and the campaign sends Monday to Friday (its window).
    assert week_one >= 5, "the example's newest mailbox should spend its first week in the run"


@pytest.mark.parametrize("seed", SEEDS)
def test_the_summary_and_report_show_what_the_server_recorded(simulate: Callable[..., SimResult],
                                                              seed: int) -> None:
    result = simulate(seed)
    summary = summarize(result)
    found = summary.deliveries
    assert found is not None
    per_mailbox = Counter(d.login.lower() for d in result.delivered)
    per_peer = Counter(d.peer for d in result.delivered)
    assert found.total == len(result.delivered) == summary.sends
    assert found.per_mailbox == dict(per_mailbox)
    assert {line.loopback: line.deliveries for line in found.per_source} == dict(per_peer)
    assert {m.address: m.sends for m in summary.mailboxes} == dict(per_mailbox)
    data = summary.to_json()["deliveries"]
    assert data["per_mailbox"] == dict(per_mailbox)
    assert sum(line["deliveries"] for line in data["per_source"]) == len(result.delivered)
    page = render_report(result, summary)
    table = page.split('<table id="deliveries-per-source">', 1)[1].split("</table>", 1)[0]
    assert table.count("<tr>") == len(per_peer) + 1  # a header and one row per address the server saw
    for peer, count in per_peer.items():
        assert f"<td>{peer}</td>" in table and f"<td>{count}</td>" in table


@pytest.mark.slow
@pytest.mark.service
def test_the_cli_reports_deliveries_and_stops_its_postgresql(tmp_path: Path, own_temp: Path) -> None:
    result = run_cli("simulate", "--days", "1", "--sends-per-day", "60", "--seed", "7", "--format", "json",
                     env={"HOME": str(tmp_path)}, cwd=tmp_path, timeout=300)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    deliveries = data["deliveries"]
    assert deliveries["total"] == data["sends"]["total"] > 0
    assert sum(deliveries["per_mailbox"].values()) == deliveries["total"]
    assert sum(line["deliveries"] for line in deliveries["per_source"]) == deliveries["total"]
    assert {line["loopback"] for line in deliveries["per_source"]} <= {
        str(ipaddress.IPv4Address("127.1.0.1") + n) for n in range(len(deliveries["per_source"]))}
    assert result.stderr == ""  # no aiosmtpd or PostgreSQL chatter
    assert processes_under(own_temp) == set(), "the simulation's PostgreSQL outlived the run"
    assert list(own_temp.iterdir()) == []  # and its data directory is gone


def test_the_inline_executor_hands_an_error_over_but_never_a_ctrl_c() -> None:
    """As a thread pool does: a task's error reaches whoever reads its future; a Ctrl-C or a stop, which a pool's
    thread never gets, goes on up at once (a future nobody read swallowed the run's Ctrl-C)."""
    from simulation.mail import InlineExecutor

    def fails() -> None:
        raise ValueError("the task's own error")

    def interrupted() -> None:
        raise KeyboardInterrupt

    future = InlineExecutor().submit(fails)
    assert isinstance(future.exception(), ValueError)
    with pytest.raises(KeyboardInterrupt):
        InlineExecutor().submit(interrupted)
    with pytest.raises(SystemExit):
        InlineExecutor().submit(lambda: (_ for _ in ()).throw(SystemExit(143)))
