"""`sendhost sender unconfirmed|resolve|retry`, run as a user runs them, on a real PostgreSQL: the rows nobody can
decide alone are listed with what is known, a person's verdict goes through the ledger's rules, a retry row is
made due now, and every bad call exits 2 naming what is wrong, with nothing changed."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from subprocess import CompletedProcess
from zoneinfo import ZoneInfo

import psycopg
import pytest

from sender import Ledger, Settle
from sender.campaigns.leads import read_leads
from sender.campaigns.spec import load_campaign
from sender.ledger.campaigns import Campaigns, Move
from sender.ledger.events import Event, Feedback
from tests.sender.attempts import SOURCE_IP, attempted, enqueued

Cli = Callable[..., CompletedProcess[str]]
BOX = "box0@sender.example"
CAMPAIGN = """\
name: q1
group: sales
steps:
  - subject: "Hello"
    body: "Hi"
  - delay: 3d
    body: "Following up"
"""


@pytest.fixture
def sender_cli(cli: Cli, database_url: str, tmp_path: Path) -> Cli:
    def run(*args: str, env: dict[str, str] | None = None) -> CompletedProcess[str]:
        return cli("sender", "--database-url", database_url, *args, cwd=tmp_path, env=env)
    result = run("migrate")
    assert result.returncode == 0, result.stderr
    return run


def _campaign(tmp_path: Path, ledger: Ledger) -> None:
    path = tmp_path / "q1.yml"
    path.write_text(CAMPAIGN)
    spec = load_campaign(path, {"sales"})
    campaigns = Campaigns(ledger)
    campaigns.apply(spec, path.read_text())
    leads = tmp_path / "q1.csv"
    leads.write_text("email\neve@rcpt.example\n")
    campaigns.add_leads("q1", read_leads(leads, spec).leads)
    campaigns.move("q1", Move.START)


def _rows(database_url: str) -> list[tuple[int, str]]:
    with psycopg.connect(database_url) as conn:
        return conn.execute("SELECT step, status::text FROM sender_emails ORDER BY lead_id, step").fetchall()


def _snapshot(database_url: str) -> tuple[object, ...]:
    with psycopg.connect(database_url) as conn:
        return tuple(conn.execute(q).fetchall() for q in (
            "SELECT id, status::text, not_before, last_error FROM sender_emails ORDER BY id",
            "SELECT email_id FROM sender_send_log ORDER BY email_id",
            "SELECT address, ended FROM sender_leads ORDER BY id",
            "SELECT count(*) FROM sender_events"))


def test_unconfirmed_lists_each_row_with_what_is_known(sender_cli: Cli, ledger: Ledger) -> None:
    enqueued(ledger, "L1")
    row, message_id = attempted(ledger, "L1", Settle.UNCONFIRMED, "timeout after DATA: no answer to the dot", BOX)
    enqueued(ledger, "L2", address="bob@rcpt.example")
    attempted(ledger, "L2", Settle.FAILED, "550 5.7.1 refused", BOX)  # decided: not listed
    result = sender_cli("unconfirmed", "--format", "json")
    assert result.returncode == 0, result.stderr
    (listed,) = json.loads(result.stdout)["unconfirmed"]
    started = listed.pop("attempt_started_at")
    assert listed == {"id": row, "campaign": "enqueue", "lead": "L1", "step": 1, "address": "eve@rcpt.example",
                      "mailbox": BOX, "source_ip": SOURCE_IP, "message_id": message_id,
                      "last_words": "timeout after DATA: no answer to the dot", "sent_folder": None}
    assert abs(datetime.fromisoformat(started) - datetime.now(UTC)) < timedelta(minutes=5)

    table = sender_cli("unconfirmed")
    assert table.returncode == 0, table.stderr
    assert message_id in table.stdout and "timeout after DATA" in table.stdout and SOURCE_IP in table.stdout
    assert "1 row(s) waiting for a person" in table.stdout


def test_no_unconfirmed_row_says_so(sender_cli: Cli) -> None:
    result = sender_cli("unconfirmed")
    assert result.returncode == 0, result.stderr
    assert "no row is unconfirmed" in result.stdout


def test_conflicts_lists_a_refused_row_a_relay_later_called_delivered(sender_cli: Cli, ledger: Ledger) -> None:
    enqueued(ledger, "L1")
    refused, _ = attempted(ledger, "L1", Settle.FAILED, "554 5.7.1 rejected at DATA", BOX)
    enqueued(ledger, "L2", address="bob@rcpt.example")
    sent, message_id = attempted(ledger, "L2", Settle.UNCONFIRMED, "timeout after DATA", BOX)
    assert ledger.resolve(sent, sent=True, note="in Sent Items") == "resolved"
    feedback = Feedback(ledger)
    # the relay's word on the refused row: recorded, the row stays failed; on the sent one: no conflict
    feedback.apply(refused, Event.DELIVERED, source="webhook", ref="relay-1", detail="250 2.0.0 queued as 4F2A")
    feedback.apply_by_message_id(message_id, Event.DELIVERED, source="webhook", ref="relay-2")
    result = sender_cli("conflicts", "--format", "json")
    assert result.returncode == 0, result.stderr
    (listed,) = json.loads(result.stdout)["conflicts"]
    reported_at = listed.pop("reported_at")
    assert listed == {"row": refused, "campaign": "enqueue", "lead": "L1", "step": 1, "address": "eve@rcpt.example",
                      "mailbox": BOX, "status": "failed", "last_error": "554 5.7.1 rejected at DATA",
                      "reported": "delivered", "source": "webhook", "detail": "250 2.0.0 queued as 4F2A"}
    assert abs(datetime.fromisoformat(reported_at) - datetime.now(UTC)) < timedelta(minutes=5)
    table = sender_cli("conflicts")
    assert "554 5.7.1 rejected at DATA" in table.stdout and "1 report(s) contradict what the agent saw" in table.stdout


def test_no_conflict_says_so(sender_cli: Cli) -> None:
    result = sender_cli("conflicts")
    assert (result.returncode, result.stdout.strip().splitlines()[-1]) == (0, "no report contradicts the agent")


@pytest.mark.parametrize("args", [("unconfirmed", "--look"), ("resolve", "--from-sent")])
def test_looking_without_an_inventory_exits_2_before_anything(sender_cli: Cli, ledger: Ledger, database_url: str,
                                                              args: tuple[str, ...]) -> None:
    enqueued(ledger, "L1")
    attempted(ledger, "L1", Settle.UNCONFIRMED, "timeout after DATA", BOX)
    before = _snapshot(database_url)
    result = sender_cli(*args)
    assert result.returncode == 2
    assert result.stderr.startswith("error: no inventory: pass --inventory PATH")
    assert _snapshot(database_url) == before


def test_resolving_as_sent_writes_the_send_log_and_the_sequence_goes_on(
        sender_cli: Cli, ledger: Ledger, tmp_path: Path, database_url: str) -> None:
    _campaign(tmp_path, ledger)
    row, message_id = attempted(ledger, "eve@rcpt.example", Settle.UNCONFIRMED, "timeout after DATA", BOX)
    result = sender_cli("resolve", str(row), "--sent", "--note", "found in Sent Items")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().startswith(f"row {row}: resolved as sent")
    assert _rows(database_url) == [(1, "sent"), (2, "queued")]
    with psycopg.connect(database_url) as conn:
        logged = conn.execute("SELECT message_id, mailbox, reply FROM sender_send_log WHERE email_id = %s",
                              (row,)).fetchall()
    assert logged == [(message_id, BOX, "resolved as sent: found in Sent Items")]
    assert any(e["kind"] == "resolved" and "found in Sent Items" in e["detail"] for e in ledger.events_of(row))
    assert json.loads(sender_cli("unconfirmed", "--format", "json").stdout) == {"unconfirmed": []}


def test_resolving_as_sent_releases_a_later_step_enqueued_ahead(sender_cli: Cli, ledger: Ledger,
                                                               database_url: str) -> None:
    enqueued(ledger, "L1")
    enqueued(ledger, "L1", step=2)  # waits for step 1
    row, _mid = attempted(ledger, "L1", Settle.UNCONFIRMED, "timeout after DATA", BOX)
    assert sender_cli("resolve", str(row), "--sent", "--note", "in Sent").returncode == 0
    assert _rows(database_url) == [(1, "sent"), (2, "queued")]


def test_resolving_as_not_sent_cancels_a_later_step_enqueued_ahead(sender_cli: Cli, ledger: Ledger,
                                                                   database_url: str) -> None:
    enqueued(ledger, "L1")
    enqueued(ledger, "L1", step=2)
    row, _mid = attempted(ledger, "L1", Settle.UNCONFIRMED, "timeout after DATA", BOX)
    assert _rows(database_url) == [(1, "unconfirmed"), (2, "waiting")]  # waits for the verdict
    assert sender_cli("resolve", str(row), "--not-sent", "--note", "not in Sent").returncode == 0
    assert _rows(database_url) == [(1, "failed"), (2, "cancelled")]


def test_resolving_as_not_sent_ends_the_sequence_failed_and_resends_nothing(
        sender_cli: Cli, ledger: Ledger, tmp_path: Path, database_url: str) -> None:
    _campaign(tmp_path, ledger)
    row, _mid = attempted(ledger, "eve@rcpt.example", Settle.UNCONFIRMED, "timeout after DATA", BOX)
    result = sender_cli("resolve", str(row), "--not-sent", "--note", "not in Sent", "--format", "json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"row": row, "resolved": "not_sent"}
    assert _rows(database_url) == [(1, "failed")]
    with psycopg.connect(database_url) as conn:
        assert conn.execute("SELECT ended FROM sender_leads WHERE address = 'eve@rcpt.example'").fetchone() == (
            "failed",)
        assert conn.execute("SELECT count(*) FROM sender_send_log").fetchone() == (0,)
    assert ledger.claim("w", 10) == []


def test_resolving_a_row_that_is_not_unconfirmed_exits_2_naming_its_status(
        sender_cli: Cli, ledger: Ledger, database_url: str) -> None:
    enqueued(ledger, "L1")
    row, _mid = attempted(ledger, "L1", Settle.RETRY, "451 4.3.0 try later", BOX, 1800)
    before = _snapshot(database_url)
    result = sender_cli("resolve", str(row), "--sent", "--note", "guess")
    assert result.returncode == 2
    assert result.stderr.strip() == (f"error: row {row} is retry, not unconfirmed: only an unconfirmed row takes a "
                                     "verdict; nothing changed")
    missing = sender_cli("resolve", "9999", "--not-sent", "--note", "x")
    assert missing.returncode == 2 and missing.stderr.startswith("error: no row 9999;")
    assert _snapshot(database_url) == before


@pytest.mark.parametrize(("args", "expected"), [
    (("--sent",), "error: name the ROW to resolve"),
    (("{row}", "--note", "seen"), "error: say what became of row {row}: --sent or --not-sent"),
    (("{row}", "--sent", "--not-sent", "--note", "seen"), "error: say what became of row {row}: --sent or "
                                                          "--not-sent, not both"),
    (("{row}", "--sent"), "error: --note TEXT: say why row {row} was sent"),
    (("{row}", "--not-sent", "--note", "  "), "error: --note TEXT: say why row {row} was not sent"),
    (("{row}", "--from-sent"), "error: --from-sent finds its rows itself"),
])
def test_a_bad_resolve_exits_2_and_changes_nothing(sender_cli: Cli, ledger: Ledger, database_url: str,
                                                   args: tuple[str, ...], expected: str) -> None:
    enqueued(ledger, "L1")
    row, _mid = attempted(ledger, "L1", Settle.UNCONFIRMED, "timeout after DATA", BOX)
    before = _snapshot(database_url)
    result = sender_cli("resolve", *(a.format(row=row) for a in args))
    assert result.returncode == 2, result.stdout
    assert result.stderr.startswith(expected.format(row=row)), result.stderr
    assert "Traceback" not in result.stderr
    assert _snapshot(database_url) == before


def test_retry_makes_a_retry_row_due_now(sender_cli: Cli, ledger: Ledger) -> None:
    enqueued(ledger, "L1")
    row, _mid = attempted(ledger, "L1", Settle.RETRY, "451 4.3.0 try later", BOX, 1800)
    assert ledger.claim("w", 10) == []
    result = sender_cli("retry", str(row))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "1 row made due now"
    assert [r.id for r in ledger.claim("w", 10)] == [row]


def test_retry_of_a_row_not_in_retry_exits_2_naming_its_status(sender_cli: Cli, ledger: Ledger,
                                                               database_url: str) -> None:
    enqueued(ledger, "L1")
    row, _mid = attempted(ledger, "L1", Settle.UNCONFIRMED, "timeout after DATA", BOX)
    before = _snapshot(database_url)
    result = sender_cli("retry", str(row))
    assert result.returncode == 2
    assert result.stderr.strip() == (f"error: row {row} is unconfirmed, not retry: only a row waiting to retry can "
                                     "be made due now")
    missing = sender_cli("retry", "9999")
    assert missing.returncode == 2 and missing.stderr.startswith("error: no row 9999;")
    assert _snapshot(database_url) == before


def test_retry_all_due_before_takes_a_time_without_a_zone_as_utc(sender_cli: Cli, ledger: Ledger) -> None:
    enqueued(ledger, "L1")
    soon, _mid = attempted(ledger, "L1", Settle.RETRY, "451", BOX, 3600)
    enqueued(ledger, "L2", address="bob@rcpt.example")
    attempted(ledger, "L2", Settle.RETRY, "451", BOX, 3 * 3600)
    between = (datetime.now(UTC) + timedelta(hours=2)).replace(tzinfo=None).isoformat(timespec="seconds")
    # The ledger's session in a zone far from UTC: a naive time handed to it as it is would be read there.
    result = sender_cli("retry", "--all-due-before", between, "--format", "json",
                        env={"PGTZ": "Asia/Kathmandu"})
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"made_due": 1}
    assert [r.id for r in ledger.claim("w", 10)] == [soon]


def test_retry_all_due_before_takes_a_time_with_its_zone(sender_cli: Cli, ledger: Ledger) -> None:
    enqueued(ledger, "L1")
    soon, _mid = attempted(ledger, "L1", Settle.RETRY, "451", BOX, 3600)
    enqueued(ledger, "L2", address="bob@rcpt.example")
    attempted(ledger, "L2", Settle.RETRY, "451", BOX, 3 * 3600)
    # Two hours from now, written as Tokyo's clock shows it (UTC+9): read as UTC it would be after both rows.
    between = (datetime.now(UTC) + timedelta(hours=2)).astimezone(ZoneInfo("Asia/Tokyo")).isoformat()
    result = sender_cli("retry", "--all-due-before", between)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "1 row made due now"
    assert [r.id for r in ledger.claim("w", 10)] == [soon]


@pytest.mark.parametrize("args", [(), ("1", "--all-due-before", "2026-03-02T09:00")])
def test_retry_wants_one_row_or_a_time(sender_cli: Cli, args: tuple[str, ...]) -> None:
    result = sender_cli("retry", *args)
    assert result.returncode == 2
    assert result.stderr.startswith("error: name one ROW in retry, or --all-due-before TIME, e.g.")


def test_a_bad_time_exits_2_naming_it_and_an_example(sender_cli: Cli, ledger: Ledger, database_url: str) -> None:
    enqueued(ledger, "L1")
    attempted(ledger, "L1", Settle.RETRY, "451", BOX, 3600)
    before = _snapshot(database_url)
    result = sender_cli("retry", "--all-due-before", "next tuesday")
    assert result.returncode == 2
    assert result.stderr.strip() == ("error: --all-due-before: 'next tuesday' is not an ISO 8601 time; write it like "
                                     "2026-03-02T09:00:00+01:00 (without a zone it is UTC)")
    assert _snapshot(database_url) == before


# --- reclassify ---------------------------------------------------------------------------------------------------

def _replied(ledger: Ledger) -> int:
    """eve's step 1 in campaign q1, sent, and read back as a reply: its row."""
    (row,) = ledger.claim("w", 1, ["sales"])
    started, _mid = ledger.begin_attempt(row.id, uuid.uuid4(), BOX, None, f"<{uuid.uuid4()}@sender.example>", "Hi")
    assert started == "ok" and ledger.record_sent(row.id, "250 ok")
    Feedback(ledger).apply(row.id, Event.REPLIED, source="inbox", ref="r1")
    return row.id


def test_reclassify_turns_a_reply_into_an_unsubscribe_that_suppresses_the_address(
        sender_cli: Cli, ledger: Ledger, tmp_path: Path, database_url: str) -> None:
    _campaign(tmp_path, ledger)
    row = _replied(ledger)
    result = sender_cli("reclassify", str(row), "--as", "unsubscribe", "--note", "she asked by phone")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == (f"row {row}: reclassified as an unsubscribe: the address is suppressed and the "
                                     "lead's sequence ended; the row is unsubscribed")
    assert ledger.is_suppressed("eve@rcpt.example")
    assert _rows(database_url) == [(1, "unsubscribed"), (2, "cancelled")]


def test_reclassify_as_left_ends_the_sequence_as_left_json(sender_cli: Cli, ledger: Ledger, tmp_path: Path,
                                                           database_url: str) -> None:
    _campaign(tmp_path, ledger)
    row = _replied(ledger)
    result = sender_cli("reclassify", str(row), "--as", "left", "--note", "write to bob@rcpt.example", "--format",
                        "json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"row": row, "as": "left", "answer": "applied", "status": "replied"}
    with psycopg.connect(database_url) as conn:
        assert conn.execute("SELECT ended, ended_note FROM sender_leads WHERE address = 'eve@rcpt.example'"
                            ).fetchone() == ("left", "write to bob@rcpt.example")
    assert not ledger.is_suppressed("eve@rcpt.example")


def test_reclassify_that_would_lower_a_row_exits_1_and_keeps_it(sender_cli: Cli, ledger: Ledger, tmp_path: Path,
                                                                database_url: str) -> None:
    _campaign(tmp_path, ledger)
    row = _replied(ledger)
    result = sender_cli("reclassify", str(row), "--as", "auto-reply")
    assert result.returncode == 1, result.stderr
    assert result.stdout.strip() == (f"row {row} is replied, which stands above auto-reply: the rank guard kept it; "
                                     "the verdict is in its history and nothing else changed")
    assert _rows(database_url) == [(1, "replied"), (2, "cancelled")]


@pytest.mark.parametrize(("args", "expected"), [
    (("{row}", "--as", "opened"), "Error: Invalid value for '--as'"),
    (("999999", "--as", "reply"), "no row 999999; check its id"),
    (("{waiting}", "--as", "reply"), "row {waiting} was never sent (queued): nothing came back about it"),
])
def test_a_bad_reclassify_exits_2_and_changes_nothing(sender_cli: Cli, ledger: Ledger, tmp_path: Path,
                                                      database_url: str, args: tuple[str, ...],
                                                      expected: str) -> None:
    _campaign(tmp_path, ledger)
    (row,) = ledger.claim("w", 1, ["sales"])
    started, _mid = ledger.begin_attempt(row.id, uuid.uuid4(), BOX, None, f"<{uuid.uuid4()}@sender.example>", "Hi")
    assert started == "ok" and ledger.record_sent(row.id, "250 ok")
    with psycopg.connect(database_url) as conn:
        (waiting,) = conn.execute("SELECT id FROM sender_emails WHERE step = 2").fetchone() or (0,)
    before = _snapshot(database_url)
    result = sender_cli("reclassify", *(a.format(row=row.id, waiting=waiting) for a in args))
    assert result.returncode == 2, result.stdout
    assert expected.format(row=row.id, waiting=waiting) in result.stderr
    assert "Traceback" not in result.stderr
    assert _snapshot(database_url) == before
