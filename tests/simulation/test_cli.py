"""`sendhost simulate` as a user runs it: a fresh interpreter, nothing running, nothing configured."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from simulation.pacing import DAILY_CAP, LIST_SIZE
from tests.conftest import REPO_ROOT, run_cli
from tests.simulation.conftest import processes_under
from toolkit.cli.simulate import example_inventory


@pytest.mark.slow
@pytest.mark.service
def test_json_summary_of_a_short_run(tmp_path: Path, own_temp: Path) -> None:
    # A poisoned AWS environment: a profile that does not exist and an endpoint that answers nothing. The
    # simulation must neither read them nor reach anything.
    env = {"AWS_PROFILE": "no-such-profile", "AWS_ENDPOINT_URL": "http://127.0.0.1:9",
           "HOME": str(tmp_path)}
    result = run_cli("simulate", "--days", "2", "--sends-per-day", "60", "--seed", "5", "--format", "json",
                     env=env, cwd=tmp_path, timeout=120)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["schema"] == 1
    assert data["run"] == {"start": "2026-11-30T00:00Z", "end": "2026-12-02T00:00Z", "days": 2,
                           "sends_per_day": 60, "seed": 5}
    assert 0 < data["sends"]["total"] <= 2 * 60
    assert data["pool"]["max_sends_on_address"] <= 15
    assert {m["address"] for m in data["mailboxes"]} == {"alice@example.com", "bob@example.com",
                                                         "carol@example.org"}
    assert data["audit"]["findings"]["warning"] == 2  # dkim.short_key, dmarc.rua_missing on example.com
    [campaign] = data["campaigns"]  # one per mailbox group: the example's is `default`
    assert (campaign["name"], campaign["group"]) == ("sim-default", "default")
    assert [(s["step"], s["delay"], s["subject"] is None) for s in campaign["steps"]] == [
        (1, "0s", False), (2, "3d", True), (3, "4d", True)]
    assert campaign["steps"][0]["sent"] == data["sends"]["total"]  # two days: only first steps are due yet
    assert campaign["leads"] == campaign["going"] + sum(campaign["ended"].values())
    assert result.stderr == ""  # no progress bar in a pipe, no warnings
    assert list(tmp_path.iterdir()) == []  # nothing written to the working directory (no .sendhost/)
    assert list(own_temp.iterdir()) == []  # the temporary Redis and PostgreSQL directories are gone
    assert processes_under(own_temp) == set()  # and their servers


@pytest.mark.slow
@pytest.mark.service
def test_table_summary_and_report(tmp_path: Path) -> None:
    report = tmp_path / "run.html"
    result = run_cli("simulate", "--days", "2", "--sends-per-day", "60", "--report", str(report), cwd=tmp_path,
                     timeout=120)
    assert result.returncode == 0, result.stderr
    for line in ("sendhost simulate: 2 days from 2026-11-30T00:00Z, seed 1", "fallbacks to the primary IP",
                 "max sends on one address", "parked EIP-hours", "alice@example.com", "dkim.short_key",
                 "campaign sim-default (group default)", "(reply in the thread)", "how the sequences ended",
                 "still going", "what bound the run", "the README's promises in this run",
                 "a send is never blocked for lack of an IP"):
        assert line in result.stdout
    assert result.stderr.strip() == f"report: {report}"
    page = report.read_text()
    # the mailboxes' days and hours, the pool's two, and the campaign's steps and its sends per day
    assert page.count('<figure class="chart"') == 6
    assert 'id="chart-steps-sim-default"' in page and 'id="steps-sim-default"' in page
    assert oct(report.stat().st_mode & 0o777) != oct(0o600)  # an ordinary file, not mkstemp's private mode


@pytest.mark.slow
@pytest.mark.service
def test_the_pacing_scenario_runs_its_own_campaigns(tmp_path: Path) -> None:
    result = run_cli("simulate", "--scenario", "pacing", "--days", "1", "--format", "json", cwd=tmp_path,
                     timeout=300)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["run"] == {"start": "2026-10-21T00:00Z", "end": "2026-10-22T00:00Z", "days": 1, "sends_per_day": 0,
                           "seed": 1}
    assert [(c["name"], c["group"], c["leads"]) for c in data["campaigns"]] == [
        ("sim-eu", "eu", LIST_SIZE), ("sim-us", "us", LIST_SIZE)]
    assert {m["address"] for m in data["mailboxes"]} == {"eu1@example.com", "eu2@example.com", "us1@example.org",
                                                         "us2@example.org"}
    # One Wednesday, both windows inside it: each campaign sends its daily cap, no more (its mailboxes may send 60)
    assert data["sends"]["total"] == 2 * DAILY_CAP
    # a row outside its lead's window is never claimed (the ledger's claim passes over it): no put-back to count
    assert "outside-window" not in data["sends"]["skipped_attempts"]
    assert "outside-window" not in data["meanings"]


def test_the_shipped_inventory_is_the_repositorys_example() -> None:
    assert example_inventory().read_text() == (REPO_ROOT / "inventory.example.yml").read_text()


@pytest.mark.parametrize(("args", "names"), [
    (("--days", "0"), "--days 0"),
    (("--days", "-3"), "--days -3"),
    (("--sends-per-day", "-1"), "--sends-per-day -1"),
    (("--inventory", "/nonexistent/inventory.yml"), "/nonexistent/inventory.yml"),
    (("--report", "/nonexistent/dir/report.html"), "/nonexistent/dir"),
    (("--zone-dir", "/nonexistent/zones"), "/nonexistent/zones"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, args: tuple[str, ...], names: str) -> None:
    result = run_cli("simulate", *args, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and names in lines[0], result.stderr
    assert result.stdout == ""
    assert list(tmp_path.iterdir()) == []


def test_a_malformed_inventory_names_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "inventory.yml"
    bad.write_text("all:\n  vars:\n    sendhost_mailboxes: 3\n")
    result = run_cli("simulate", "--inventory", str(bad), cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.startswith(f"error: {bad}:") and len(result.stderr.strip().splitlines()) == 1


@pytest.mark.service
def test_user_environment_is_untouched_in_process(monkeypatch: pytest.MonkeyPatch) -> None:
    from simulation.sandbox import sandbox

    monkeypatch.setenv("AWS_PROFILE", "mine")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAREALLOOKING")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY", raising=False)
    before = {k: v for k, v in os.environ.items() if k.startswith("AWS_")}
    with sandbox("us-east-1") as (client, state_dir):
        assert os.environ["AWS_ACCESS_KEY_ID"] != "AKIAREALLOOKING" and "AWS_PROFILE" not in os.environ
        pid = int(client.info("server")["process_id"])
    assert {k: v for k, v in os.environ.items() if k.startswith("AWS_")} == before
    assert not state_dir.exists()
    deadline = time.monotonic() + 10
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(pid), "the embedded Redis server outlived the simulation"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (exited, not yet reaped by its parent) is gone for our purposes.
    status = Path(f"/proc/{pid}/status")
    return not (status.exists() and "\nState:\tZ" in status.read_text())
