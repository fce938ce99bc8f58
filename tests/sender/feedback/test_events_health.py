"""Feedback into the warm-up gates, on a real ledger and a real Redis: complaints hold or pause a mailbox through
the spam-rate gate, a hard-bounce rate of 5% over a week pauses it, and few sends judge nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import psycopg
import pytest
import redis

from sender import Settle
from sender.feedback.health import apply_health
from sender.ledger.events import Event, Feedback, Verdict
from tests.conftest import REPO_ROOT
from tests.sender.web_server import sent_row
from warmup import Guard

BOX = "box0@sender.example"


@pytest.fixture
def feedback(database_url: str) -> Iterator[Feedback]:
    with psycopg.connect(database_url, autocommit=True) as conn:  # hundreds of rows: no crash simulated here
        conn.execute(f"ALTER DATABASE {conn.info.dbname} SET synchronous_commit = off")
    with Feedback.from_url(database_url) as opened:
        opened.ledger.migrate()
        yield opened


@pytest.fixture
def guard(redis_url: str) -> Iterator[Guard]:
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    opened = Guard(client)
    opened.add_mailbox(BOX, start=date.today() - timedelta(days=90), min_gap_s=0, jitter_s=(0, 0))
    yield opened
    client.close()


def _sends(feedback: Feedback, count: int, *, bounced: int = 0, complained: int = 0) -> None:
    rows = [sent_row(feedback, f"L{n}", f"lead{n}@rcpt.example", mailbox=BOX)[0] for n in range(count)]
    for row in rows[:bounced]:
        feedback.apply(row, Event.BOUNCED, source="inbox", ref="b")
    for row in rows[bounced:bounced + complained]:
        feedback.apply(row, Event.COMPLAINED, source="inbox", ref="c")


def _state(guard: Guard) -> tuple[str, str | None]:
    (status,) = guard.status([BOX])
    return status.state, status.reason


def test_a_hard_bounce_rate_of_five_percent_pauses_the_mailbox(feedback: Feedback, guard: Guard) -> None:
    _sends(feedback, 40, bounced=2)
    (action,) = apply_health(feedback, guard, [BOX], datetime.now(UTC))
    assert (action.health.sent, action.health.bounced, action.verdict) == (40, 2, "bounce-pause")
    state, reason = _state(guard)
    assert state == "paused" and reason is not None and "hard-bounce rate 5.0%" in reason


def test_each_row_counts_once_and_forged_feedback_never(feedback: Feedback, guard: Guard) -> None:
    """One recipient who knows one Message-ID and sends 3 ARF reports and 2 DSNs about it counts once each; feedback
    the provider found forged counts not at all."""
    rows = [sent_row(feedback, f"L{n}", f"lead{n}@rcpt.example", mailbox=BOX)[0] for n in range(40)]
    for n in range(3):
        feedback.apply(rows[0], Event.COMPLAINED, source="inbox", ref=f"<arf-{n}@x.example>")
    for n in range(2):
        feedback.apply(rows[0], Event.BOUNCED, source="inbox", ref=f"<dsn-{n}@x.example>")
    for row in rows[1:4]:
        feedback.apply(row, Event.BOUNCED, source="inbox", ref="forged", verdict=Verdict.FAIL)
        feedback.apply(row, Event.COMPLAINED, source="inbox", ref="forged", verdict=Verdict.FAIL)
    assert feedback.health_since(datetime.now(UTC) - timedelta(days=7))[BOX] == \
        {"sent": 40, "bounced": 1, "complained": 1}
    (action,) = apply_health(feedback, guard, [BOX], datetime.now(UTC))
    assert (action.health.bounced, action.verdict) == (1, "pause")  # one complaint in 40 is still 2.5%


def test_a_recipient_refused_at_rcpt_is_a_hard_bounce(feedback: Feedback, guard: Guard) -> None:
    """550 5.1.1 at RCPT suppresses the address and counts like a bounced DSN: 2 refused of 40 attempts pause."""
    for n in range(38):
        sent_row(feedback, f"L{n}", f"lead{n}@rcpt.example", mailbox=BOX)
    for n in range(2):
        feedback.ledger.enqueue(lead=f"R{n}", step=1, address=f"gone{n}@rcpt.example", group="sales", subject="Hi",
                                text="Hello")
        (row,) = [r for r in feedback.ledger.claim("w1", 10) if r.lead == f"R{n}"]
        feedback.ledger.begin_attempt(row.id, uuid.uuid4(), BOX, None, f"<{uuid.uuid4()}@sender.example>")
        assert feedback.ledger.settle(row.id, Settle.BOUNCE, "550 5.1.1 user unknown") == "suppressed"
        assert feedback.ledger.is_suppressed(f"gone{n}@rcpt.example")
    assert feedback.health_since(datetime.now(UTC) - timedelta(days=7))[BOX] == \
        {"sent": 40, "bounced": 2, "complained": 0}
    (action,) = apply_health(feedback, guard, [BOX], datetime.now(UTC))
    assert action.verdict == "bounce-pause"


def test_below_five_percent_or_too_few_sends_judge_nothing(feedback: Feedback, guard: Guard) -> None:
    _sends(feedback, 10, bounced=1)  # 10%, but only 10 sends
    (action,) = apply_health(feedback, guard, [BOX], datetime.now(UTC))
    assert action.verdict == "ok" and _state(guard)[0] != "paused"
    for n in range(20):
        sent_row(feedback, f"M{n}", f"more{n}@rcpt.example", mailbox=BOX)
    (action,) = apply_health(feedback, guard, [BOX], datetime.now(UTC))  # 1 of 30: 3.3%
    assert action.verdict == "ok" and _state(guard)[0] != "paused"


def test_complaints_pause_through_the_spam_rate_gate(feedback: Feedback, guard: Guard) -> None:
    _sends(feedback, 30, complained=1)  # 3.3%: far over 0.3%
    (action,) = apply_health(feedback, guard, [BOX], datetime.now(UTC))
    assert action.verdict == "pause"
    state, reason = _state(guard)
    assert state == "paused" and reason is not None and "spam rate" in reason


def test_a_complaint_rate_between_the_lines_holds_the_ramp(feedback: Feedback, guard: Guard) -> None:
    _sends(feedback, 500, complained=1)  # 0.2%: hold, not pause
    (action,) = apply_health(feedback, guard, [BOX], datetime.now(UTC))
    assert action.verdict == "hold"
    assert _state(guard)[0] != "paused"


def test_a_mailbox_the_guard_does_not_know_is_skipped(feedback: Feedback, guard: Guard) -> None:
    assert apply_health(feedback, guard, ["stranger@sender.example"], datetime.now(UTC)) == []


def test_sender_health_shows_each_mailbox(feedback: Feedback, database_url: str, tmp_path: Path) -> None:
    _sends(feedback, 40, bounced=2, complained=1)
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "SENDHOST_STATE_DIR": str(tmp_path / "state")}
    result = subprocess.run([sys.executable, "-c", "from toolkit.cli import main; main()", "sender", "--database-url",
                             database_url, "health", "--format", "json"], capture_output=True, text=True, env=env,
                            cwd=tmp_path, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"mailboxes": [
        {"mailbox": BOX, "sent_7d": 40, "hard_bounces_7d": 2, "hard_bounce_rate": 0.05, "complaints_7d": 1,
         "complaint_rate": 0.025, "verdict": "pause", "gate": "paused"}]}
