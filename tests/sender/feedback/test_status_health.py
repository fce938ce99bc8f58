"""Mailbox health in `sendhost sender status` and `sendhost warmup status`, run as a user runs them on a real
PostgreSQL ledger and a real Redis: the window's sends, hard bounces, complaints, their rates and the gate, in the
table and in JSON; `warmup status` writes nothing, and says health is unavailable when it cannot read a ledger."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from subprocess import CompletedProcess

import pytest
import redis

from sender.feedback.health import Gate, MailboxHealth
from sender.ledger.events import Event, Feedback
from tests.conftest import run_cli
from tests.sender.web_server import sent_row
from warmup import Guard

BOUNCY = "bouncy@sender.example"
QUIET = "quiet@sender.example"

Cli = Callable[..., CompletedProcess[str]]


def _sends(feedback: Feedback, mailbox: str, count: int, *, bounced: int = 0, complained: int = 0) -> None:
    rows = [sent_row(feedback, f"{mailbox}-{n}", f"lead{n}@rcpt.example", mailbox=mailbox)[0] for n in range(count)]
    for row in rows[:bounced]:
        feedback.apply(row, Event.BOUNCED, source="inbox", ref="b")
    for row in rows[bounced:bounced + complained]:
        feedback.apply(row, Event.COMPLAINED, source="inbox", ref="c")


@pytest.mark.parametrize(("sent", "bounced", "complained", "gate"), [
    (0, 0, 0, Gate.OK),
    (1000, 0, 0, Gate.OK),
    (1000, 0, 1, Gate.HOLDING_RAMP),  # 0.1%: the ramp stops rising
    (1000, 0, 3, Gate.PAUSED),  # 0.3%: Gmail's line
    (40, 2, 0, Gate.PAUSED),  # 5% hard bounces
    (19, 5, 0, Gate.OK),  # too few sends to judge bounces
    (0, 0, 1, Gate.PAUSED),  # a complaint with no send in the window
])
def test_the_gate_a_window_makes(sent: int, bounced: int, complained: int, gate: Gate) -> None:
    assert MailboxHealth("a@x.example", sent, bounced, complained).gate == gate


def _inventory(tmp_path: Path) -> Path:
    path = tmp_path / "inventory.yml"
    path.write_text("all:\n  vars:\n    sendhost_mailboxes:\n"
                    f"      - {{address: {BOUNCY}, domain: sender.example, start: '2026-01-01', group: sales}}\n"
                    f"      - {{address: {QUIET}, domain: sender.example, start: '2026-01-01', group: sales}}\n"
                    "  children:\n    senders:\n      hosts: {}\n")
    return path


def test_sender_status_shows_each_mailboxs_health(feedback: Feedback, database_url: str, tmp_path: Path) -> None:
    _sends(feedback, BOUNCY, 40, bounced=2, complained=1)
    inventory = _inventory(tmp_path)
    result = run_cli("--inventory", str(inventory), "sender", "--database-url", database_url, "status", "--format",
                     "json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["counts"]["sent"] == 37 and data["counts"]["bounced"] == 2 and data["counts"]["complained"] == 1
    assert data["health"] == [
        {"mailbox": BOUNCY, "sent_7d": 40, "hard_bounces_7d": 2, "hard_bounce_rate": 0.05, "complaints_7d": 1,
         "complaint_rate": 0.025, "verdict": "pause", "gate": "paused"},
        {"mailbox": QUIET, "sent_7d": 0, "hard_bounces_7d": 0, "hard_bounce_rate": 0.0, "complaints_7d": 0,
         "complaint_rate": 0.0, "verdict": "ok", "gate": "ok"}]
    table = run_cli("--inventory", str(inventory), "sender", "--database-url", database_url, "status", cwd=tmp_path)
    assert table.returncode == 0, table.stderr
    lines = [" ".join(line.strip("│ ").split()) for line in table.stdout.splitlines()]
    assert "mailbox health, last 7 days" in lines
    assert f"{BOUNCY} │ 40 │ 2 (5.0%) │ 1 (2.5%) │ paused" in lines, table.stdout
    assert f"{QUIET} │ 0 │ 0 (0.0%) │ 0 (0%) │ ok" in lines, table.stdout


def _warmup_box(redis_url: str, mailbox: str) -> None:
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    Guard(client).add_mailbox(mailbox, start=datetime.now(UTC).date() - timedelta(days=30), min_gap_s=0,
                              jitter_s=(0, 0))
    client.close()


def _snapshot(redis_url: str) -> dict[str, bytes | None]:
    client = redis.Redis.from_url(redis_url)
    dumped = {key.decode(): client.dump(key) for key in client.keys("*")}
    client.close()
    return dumped


def test_warmup_status_shows_health_from_the_ledger_and_writes_nothing(feedback: Feedback, database_url: str,
                                                                        redis_url: str, tmp_path: Path) -> None:
    _sends(feedback, BOUNCY, 40, bounced=2)
    _warmup_box(redis_url, BOUNCY)
    _warmup_box(redis_url, QUIET)
    before = _snapshot(redis_url)
    env = {"SENDHOST_DATABASE_URL": database_url}
    result = run_cli("--redis-url", redis_url, "warmup", "status", "--format", "json", env=env, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    health = {row["mailbox"]: row["health"] for row in json.loads(result.stdout)}
    assert health[BOUNCY] == {"mailbox": BOUNCY, "sent_7d": 40, "hard_bounces_7d": 2, "hard_bounce_rate": 0.05,
                              "complaints_7d": 0, "complaint_rate": 0.0, "verdict": "pause", "gate": "paused"}
    assert health[QUIET]["gate"] == "ok" and health[QUIET]["sent_7d"] == 0
    table = run_cli("--redis-url", redis_url, "warmup", "status", env=env, cwd=tmp_path)
    assert table.returncode == 0, table.stderr
    lines = [" ".join(line.strip("│ ").split()) for line in table.stdout.splitlines()]
    assert f"{BOUNCY} │ 40 │ 2 (5.0%) │ 0 (0%) │ paused" in lines, table.stdout
    assert _snapshot(redis_url) == before
    # the embedded ledger was not started either (as root it would live elsewhere, named by postgres.id)
    assert not (tmp_path / ".sendhost" / "postgres").exists() and not (tmp_path / ".sendhost" / "postgres.id").exists()


@pytest.mark.parametrize(("env", "reason"), [
    ({}, "no send ledger yet under .sendhost (the embedded PostgreSQL is created by the first"),
    ({"SENDHOST_DATABASE_URL": "postgresql://postgres@127.0.0.1:1/ledger"},
     "database postgresql://postgres@127.0.0.1:1/ledger unreachable"),
    ({"SENDHOST_DATABASE_URL": "mysql://x"}, "is not a PostgreSQL URL"),
], ids=["none", "unreachable", "malformed"])
def test_warmup_status_without_a_ledger_says_health_unavailable(redis_url: str, tmp_path: Path,
                                                                env: dict[str, str], reason: str) -> None:
    _warmup_box(redis_url, QUIET)
    result = run_cli("--redis-url", redis_url, "warmup", "status", "--format", "json", env=env, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    [row] = json.loads(result.stdout)
    assert row["state"] == "ready"  # the warm-up state is still shown
    assert row["health"]["gate"] == "unavailable" and row["health"]["sent_7d"] is None
    assert reason in row["health"]["reason"]
    table = run_cli("--redis-url", redis_url, "warmup", "status", env=env, cwd=tmp_path)
    assert table.returncode == 0, table.stderr
    assert "mailbox health unavailable: " in table.stdout and reason in table.stdout
    assert " ok" not in table.stdout.split("mailbox health unavailable")[1]


def test_warmup_status_on_an_unmigrated_ledger_says_run_migrate(database_url: str, redis_url: str,
                                                                tmp_path: Path) -> None:
    _warmup_box(redis_url, QUIET)
    result = run_cli("--redis-url", redis_url, "warmup", "status", "--format", "json",
                     env={"SENDHOST_DATABASE_URL": database_url}, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    [row] = json.loads(result.stdout)
    assert row["health"]["gate"] == "unavailable" and "sendhost sender migrate" in row["health"]["reason"]
