"""The embedded servers as the CLI shows them, run as a user runs the commands, on the real embedded Redis and
PostgreSQL of a temporary state directory: `embedded status` lists both (running, pid, data, how to reach it, who
runs it), `embedded stop` stops both or the one named and leaves no process behind, `config show` names the
embedded ledger where no database URL is set, `warmup status` reads that ledger's health as `sender status` does,
and `sender show` of a missing row points at a command that lists rows."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from sender.embedded import embedded_url, stop_embedded_postgres
from sender.embedded_place import ROOT_HOME, SERVER_USER, locate
from sender.ledger.events import Feedback
from sendhost.embedded import stop_embedded
from tests.conftest import run_cli
from tests.sender.web_server import sent_row

MAILBOX = "box@sender.example"


def _processes_under(*directories: Path) -> list[str]:
    """The processes that work in, or name on their command line, any of `directories` (a server left running)."""
    roots = [str(directory.resolve()) for directory in directories]
    found = []
    for process in psutil.process_iter(["pid", "cwd", "cmdline", "status"]):
        if process.info["status"] == psutil.STATUS_ZOMBIE:
            continue
        cwd = process.info["cwd"] or ""
        cmdline = " ".join(process.info["cmdline"] or [])
        if any(cwd == root or cwd.startswith(root + "/") or root in cmdline for root in roots):
            found.append(f"{process.info['pid']}: {cmdline} (in {cwd})")
    return found


@pytest.fixture
def state() -> Iterator[Path]:
    """A fresh state directory; afterwards both servers stopped, the data removed, and no process of theirs left."""
    base = Path(tempfile.mkdtemp(prefix="sendhost-embedded-cli-"))
    state = base / ".sendhost"
    try:
        yield state
    finally:
        place = locate(state)
        stop_embedded(state)
        stop_embedded_postgres(state)
        left = _processes_under(base, *([place.data_dir] if place is not None else []))
        if place is not None and place.run_as is not None:
            shutil.rmtree(place.data_dir, ignore_errors=True)
        shutil.rmtree(base, ignore_errors=True)
        assert not left, left


def _env(state: Path) -> dict[str, str]:
    return {"SENDHOST_STATE_DIR": str(state)}


def _status(state: Path) -> dict[str, object]:
    result = run_cli("embedded", "status", "--format", "json", env=_env(state))
    assert result.returncode == 0, result.stderr
    shown: dict[str, object] = json.loads(result.stdout)
    return shown


@pytest.mark.service
def test_embedded_status_lists_both_servers_and_stop_by_name_leaves_nothing_running(state: Path) -> None:
    env = _env(state)
    before = _status(state)
    assert before["running"] is False and before["postgres"]["running"] is False  # type: ignore[index]
    assert before["postgres"]["created"] is False  # type: ignore[index]
    assert run_cli("sender", "migrate", env=env).returncode == 0  # starts the embedded PostgreSQL
    assert run_cli("warmup", "status", env=env).returncode == 0  # starts the embedded Redis
    shown = _status(state)
    postgres = shown["postgres"]
    assert isinstance(postgres, dict)
    place = locate(state)
    assert place is not None
    assert shown["running"] is True and postgres["running"] is True and postgres["created"] is True
    assert postgres["data_dir"] == str(place.data_dir) and postgres["url"] == embedded_url(state)
    root = os.geteuid() == 0
    assert postgres["system_user"] is root
    assert postgres["server_user"] == (SERVER_USER if root else place.clients[0])
    if root:
        assert place.data_dir.parent == ROOT_HOME
    table = run_cli("embedded", "status", env=env).stdout
    lines = [" ".join(line.strip("│ ").split()) for line in table.splitlines()]
    assert f"url │ {postgres['url']}" in lines, table
    assert f"data directory │ {place.data_dir}" in lines, table
    assert f"running │ yes, pid {postgres['pid']}" in lines and f"running │ yes, pid {shown['pid']}" in lines
    assert any(line.startswith(f"runs as │ {postgres['server_user']}") for line in lines)
    assert ("a system user sendhost creates" in table) is root

    only_postgres = run_cli("embedded", "stop", "postgres", env=env)
    assert only_postgres.returncode == 0, only_postgres.stderr
    assert f"pid {postgres['pid']}" in only_postgres.stdout and "Redis" not in only_postgres.stdout
    half = _status(state)
    assert half["running"] is True and half["postgres"]["running"] is False  # type: ignore[index]
    assert not _processes_under(place.data_dir)

    assert run_cli("sender", "status", env=env).returncode == 0  # starts it again, its data kept
    both = run_cli("embedded", "stop", env=env)
    assert both.returncode == 0, both.stderr
    assert f"pid {shown['pid']}" in both.stdout and "stopped the embedded PostgreSQL" in both.stdout
    after = _status(state)
    assert after["running"] is False and after["postgres"]["running"] is False  # type: ignore[index]
    assert not _processes_under(state.parent, place.data_dir)

    unknown = run_cli("embedded", "stop", "mysql", env=env)
    assert unknown.returncode == 2 and "mysql" in unknown.stderr and "redis" in unknown.stderr


@pytest.mark.service
def test_config_show_names_the_embedded_ledger_or_the_masked_url_and_its_source(state: Path,
                                                                                 tmp_path: Path) -> None:
    env = _env(state)
    assert run_cli("sender", "migrate", env=env).returncode == 0
    place = locate(state)
    assert place is not None
    shown = json.loads(run_cli("config", "show", "--format", "json", env=env).stdout)
    assert shown["database_url"]["value"] is None
    assert shown["database_url"]["embedded"] == str(place.data_dir)
    assert shown["database_url"]["source"].startswith("default")
    table = run_cli("config", "show", env=env)
    assert table.returncode == 0, table.stderr
    lines = [" ".join(line.strip("│ ").split()) for line in table.stdout.splitlines()]
    assert any(line.startswith(f"database_url │ embedded ({place.data_dir}) │ default") for line in lines), \
        table.stdout

    inventory = tmp_path / "inventory.yml"
    inventory.write_text("all:\n  vars:\n    sendhost_database_url: postgresql://app:inv-s3cret@db.example/ledger\n"
                         "  children:\n    senders:\n      hosts: {}\n")
    from_file = run_cli("--inventory", str(inventory), "config", "show", env=env)
    assert "postgresql://app:***@db.example/ledger" in from_file.stdout and "inv-s3cret" not in from_file.stdout
    assert f"inventory {inventory}:3" in from_file.stdout
    configured = json.loads(run_cli("config", "show", "--format", "json", env={
        **env, "SENDHOST_DATABASE_URL": "postgresql://app:env-s3cret@db.example/ledger"}).stdout)["database_url"]
    assert configured == {"value": "postgresql://app:***@db.example/ledger", "source": "env SENDHOST_DATABASE_URL"}


@pytest.mark.service
def test_warmup_status_reads_the_embedded_ledgers_health_as_sender_status_does(state: Path) -> None:
    env = _env(state)
    assert run_cli("warmup", "add", MAILBOX, "--start", "2026-01-01", env=env).returncode == 0
    none_yet = json.loads(run_cli("warmup", "status", "--format", "json", env=env).stdout)[0]["health"]
    assert none_yet["gate"] == "unavailable" and "no send ledger yet" in none_yet["reason"]
    assert locate(state) is None or not (locate(state).data_dir / "PG_VERSION").exists()  # type: ignore[union-attr]

    assert run_cli("sender", "migrate", env=env).returncode == 0
    with Feedback.from_url(embedded_url(state)) as feedback:
        for n in range(3):
            sent_row(feedback, f"L{n}", f"lead{n}@rcpt.example", mailbox=MAILBOX)
    stop_embedded_postgres(state)  # stopped: `warmup status` starts it again, as `sender status` would
    result = run_cli("warmup", "status", "--format", "json", env=env)
    assert result.returncode == 0, result.stderr
    [row] = json.loads(result.stdout)
    sender = json.loads(run_cli("sender", "status", "--format", "json", env=env).stdout)
    assert row["health"] == next(h for h in sender["health"] if h["mailbox"] == MAILBOX)
    assert row["health"]["sent_7d"] == 3 and row["health"]["gate"] == "ok"
    table = run_cli("warmup", "status", env=env).stdout
    assert "mailbox health unavailable" not in table
    assert any(" ".join(line.strip("│ ").split()).startswith(f"{MAILBOX} │ 3 │") for line in table.splitlines())


def _started(server: str, state: Path) -> str:
    unset = {"Redis": "no --redis-url, SENDHOST_REDIS_URL, REDIS_URL or inventory sendhost_redis_url",
             "PostgreSQL": "no --database-url, SENDHOST_DATABASE_URL or inventory sendhost_database_url"}[server]
    return (f"reading the embedded {server} under {state}/ ({unset}): started it, and it stays up for the next "
            "command (`sendhost embedded stop` stops it)")


@pytest.mark.service
def test_a_reading_command_that_starts_an_embedded_server_says_which_it_reads_and_that_it_stays_up(
        state: Path) -> None:
    env = _env(state)
    first = run_cli("lead", "show", "eve@rcpt.example", env=env)
    assert first.returncode == 1 and first.stderr.splitlines()[0] == _started("PostgreSQL", state), first.stderr
    pool = run_cli("pool", "status", env=env)
    assert pool.returncode == 0 and pool.stderr == _started("Redis", state) + "\n", pool.stderr
    shown = _status(state)  # left running on purpose, as the line says: the next command finds them up
    assert shown["running"] is True and shown["postgres"]["running"] is True  # type: ignore[index]
    again = run_cli("sender", "status", env=env)
    assert again.returncode == 0 and again.stderr == "", again.stderr  # said only by the command that started it
    assert run_cli("warmup", "add", MAILBOX, "--start", "2026-01-01", env=env).returncode == 0
    assert run_cli("embedded", "stop", env=env).returncode == 0
    health = run_cli("warmup", "status", env=env)  # it reads the ledger's health as well as Redis
    assert health.stderr.splitlines()[:2] == [_started("Redis", state), _started("PostgreSQL", state)], health.stderr

    assert run_cli("embedded", "stop", env=env).returncode == 0
    written = run_cli("sender", "migrate", env=env)  # a command that writes starts them to write: nothing to say
    assert written.returncode == 0 and "reading the embedded" not in written.stderr, written.stderr


@pytest.mark.service
def test_sender_show_of_a_missing_row_points_at_a_command_that_lists_rows(state: Path, tmp_path: Path) -> None:
    env = _env(state)
    csv = tmp_path / "leads.csv"
    csv.write_text("lead,step,address,group,subject,text\nL1,1,a@example.com,sales,Hi,x\nL1,2,a@example.com,sales,Re,y\n")
    enqueued = run_cli("sender", "enqueue", str(csv), env=env)  # step 2 waits behind step 1
    assert enqueued.returncode == 0, enqueued.stderr
    assert enqueued.stdout.strip() == ("1 queued, 0 refused as duplicates, 0 refused as suppressed, 1 queued behind "
                                       "the lead's earlier step")
    missing = run_cli("sender", "show", "L-99", "1", env=env)
    assert missing.returncode == 1
    assert "no row for lead 'L-99' step 1; no such lead in any campaign" in missing.stderr
    assert "sendhost lead show ID_OR_ADDRESS" in missing.stderr and "sender status" not in missing.stderr
    other_step = run_cli("sender", "show", "L1", "3", env=env)
    assert other_step.returncode == 1
    assert "it has steps 1, 2; `sendhost lead show L1` lists them" in other_step.stderr
    listed = run_cli("lead", "show", "L1", env=env)  # the command named does list them
    assert listed.returncode == 0, listed.stderr
    steps = [line.split("│")[1].strip() for line in listed.stdout.splitlines() if line.startswith("│")]
    assert steps == ["1", "2"], listed.stdout
