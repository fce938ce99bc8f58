"""`sendhost campaign forecast NAME`, run as a user runs it, on a real PostgreSQL and Redis: what it says, its bad
input (one line, exit 2), and that it writes nothing to the ledger or the guard it reads."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from subprocess import CompletedProcess

import psycopg
import pytest
import redis

from tests.support.cli import run_cli

pytestmark = pytest.mark.service

Cli = Callable[..., CompletedProcess[str]]
LEADS = 12
INVENTORY = """\
all:
  vars:
    sendhost_mailboxes:
      - address: box1@sender.example
        domain: sender.example
        start: '2026-01-05'
        group: {group}
        timezone: Europe/Berlin
        smtp: {{host: smtp.sender.example, security: starttls, username: box1@sender.example,
               password_env: SENDHOST_SECRET_BOX1_PW}}
  children:
    senders:
      hosts: {{}}
"""
CAMPAIGN = """\
name: q1
group: sales
steps:
  - subject: "Hello"
    body: "Hi"
  - delay: 1d
    body: "Following up"
timezone: Europe/Berlin
"""


def _sendhost(tmp_path: Path, database_url: str, redis_url: str, group: str = "sales") -> Cli:
    inventory = tmp_path / f"inventory-{group}.yml"
    inventory.write_text(INVENTORY.format(group=group))

    def run(command: str, *args: str, redis: str = redis_url) -> CompletedProcess[str]:
        return run_cli("--inventory", str(inventory), "--redis-url", redis, command, "--database-url",
                       database_url, *args, cwd=tmp_path)

    return run


@pytest.fixture
def sendhost(tmp_path: Path, database_url: str, redis_url: str) -> Cli:
    """`sendhost GROUP --database-url URL ARGS...`: a migrated ledger holding campaign q1, running, with LEADS
    leads; one mailbox of its group, at its ramp's ceiling (it started in January)."""
    run = _sendhost(tmp_path, database_url, redis_url)
    (tmp_path / "q1.yml").write_text(CAMPAIGN)
    (tmp_path / "leads.csv").write_text("address,lead\n" + "".join(f"p{n}@rcpt.example,crm-{n}\n"
                                                                 for n in range(LEADS)))
    for args in (("sender", "migrate"), ("campaign", "apply", "q1.yml"), ("campaign", "add-leads", "q1", "leads.csv"),
                 ("campaign", "start", "q1")):
        done = run(*args)
        assert done.returncode == 0, (args, done.stderr)
    return run


def _ledger_rows(database_url: str) -> list[tuple[object, ...]]:
    with psycopg.connect(database_url) as conn:
        return conn.execute("SELECT id, status::text, due_at, not_before FROM sender_emails ORDER BY id").fetchall()


def test_the_forecast_sends_every_lead_both_steps_and_writes_nothing(sendhost: Cli, database_url: str,
                                                                     redis_client: redis.Redis) -> None:
    rows_before = _ledger_rows(database_url)
    keys_before = sorted(redis_client.scan_iter(match="sendhost:warmup*"))

    done = sendhost("campaign", "forecast", "q1", "--days", "5", "--format", "json")

    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    days = found["days"]
    assert len(days) == 5 and found["timezone"] == "Europe/Berlin"
    assert sum(day["first_steps"] for day in days) == LEADS
    assert sum(day["follow_ups"] for day in days) == LEADS  # nobody answers: every lead gets its follow-up
    assert all(sum(day["by_mailbox"].values()) == day["sends"] for day in days)
    assert {box for day in days for box in day["by_mailbox"]} == {"box1@sender.example"}
    assert found["steps_left"] == 0 and found["last_step_day"] == max(d["day"] for d in days if d["sends"])
    assert days[-1]["limit"] == "leads"  # the last days: everything due went
    assert _ledger_rows(database_url) == rows_before  # the ledger it read is unchanged
    assert sorted(redis_client.scan_iter(match="sendhost:warmup*")) == keys_before


def test_a_reply_rate_ends_sequences_before_their_follow_ups(sendhost: Cli) -> None:
    done = sendhost("campaign", "forecast", "q1", "--days", "5", "--reply-rate", "0.5", "--format", "json")
    assert done.returncode == 0, done.stderr
    days = json.loads(done.stdout)["days"]
    follow_ups = sum(day["follow_ups"] for day in days)
    assert sum(day["first_steps"] for day in days) == LEADS and 0 < follow_ups < LEADS


def test_the_table_names_each_day_its_limit_and_when_it_ends(sendhost: Cli) -> None:
    done = sendhost("campaign", "forecast", "q1", "--days", "3")
    assert done.returncode == 0, done.stderr
    assert "campaign q1 forecast from" in done.stdout and "days in Europe/Berlin" in done.stdout
    assert "the last step goes on" in done.stdout and "if nobody answers" in done.stdout
    assert "leads: everything due went" in done.stdout


def test_without_redis_the_counts_are_rebuilt_from_the_ledger_and_it_says_so(sendhost: Cli) -> None:
    done = sendhost("campaign", "forecast", "q1", "--days", "2", redis="redis://127.0.0.1:9/0")
    assert done.returncode == 0, done.stderr
    assert "the guard's counts today were not read" in done.stdout and "rebuilt from the ledger" in done.stdout


@pytest.mark.parametrize(("args", "words"), [
    (("q1", "--days", "0"), "--days 0: forecast 1 to 90 days ahead"),
    (("q1", "--reply-rate", "1.5"), "--reply-rate 1.5: a share from 0 to 1"),
    (("nope",), "no campaign 'nope'"),
])
def test_bad_input_is_one_line_and_exit_2(sendhost: Cli, args: tuple[str, ...], words: str) -> None:
    done = sendhost("campaign", "forecast", *args)
    assert done.returncode == 2 and words in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "Traceback" not in done.stderr


def test_a_campaign_no_inventory_mailbox_sends_is_refused(sendhost: Cli, tmp_path: Path, database_url: str,
                                                          redis_url: str) -> None:
    other = _sendhost(tmp_path, database_url, redis_url, group="support")
    done = other("campaign", "forecast", "q1")
    assert done.returncode == 2 and "no mailbox of group sales with smtp settings" in done.stderr, done.stderr


def test_a_paused_campaign_sends_nothing_and_says_it_is_not_running(sendhost: Cli) -> None:
    assert sendhost("campaign", "pause", "q1").returncode == 0
    done = sendhost("campaign", "forecast", "q1", "--days", "2", "--format", "json")
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert [day["sends"] for day in found["days"]] == [0, 0]
    assert {day["limit"] for day in found["days"]} == {"not-running"}
    assert found["last_step_day"] is None and found["steps_left"] == LEADS * 2
