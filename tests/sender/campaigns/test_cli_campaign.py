"""`sendhost campaign apply|add-leads|start|pause|resume|stop|status|reassign`, `sendhost lead show` and the
addresses of `sender suppress|enqueue|show`, run as a user runs them (in process, through run_cli), on a real
PostgreSQL."""

from __future__ import annotations

import json
import time as time_module
import uuid
from collections.abc import Callable
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from subprocess import CompletedProcess
from typing import Any
from zoneinfo import ZoneInfo

import psycopg
import pytest
import redis

from sender import Ledger
from sender.ledger.events import Event, Feedback
from tests.support.cli import lines_wider_than, run_cli_on_terminal, words_cut
from warmup import FailureClass, Guard
from warmup.keys import GroupKeys

Cli = Callable[..., CompletedProcess[str]]
BOX1, BOX2, BOX3 = "box1@sender.example", "box2@sender.example", "box3@sender.example"
INVENTORY = f"""\
all:
  vars:
    sendhost_mailboxes:
      - {{address: {BOX1}, domain: sender.example, start: '2026-11-01', group: sales}}
      - {{address: {BOX2}, domain: sender.example, start: '2026-11-01', group: sales}}
      - {{address: {BOX3}, domain: sender.example, start: '2026-11-01', group: support}}
  children:
    senders:
      hosts: {{}}
"""
CAMPAIGN = """\
name: {name}
group: sales
fields: [first_name]
steps:
  - subject: "Hello {{first_name|there}}"
    body: "Hi {{first_name|there}}"
  - delay: 3d
    body: "Following up"
  - delay: 4d
    body: "Last one"
"""
LEADS = "address,lead,timezone,first_name\n"


@pytest.fixture
def sendhost(cli: Cli, database_url: str, redis_url: str, tmp_path: Path) -> Cli:
    """`sendhost GROUP --database-url URL ARGS...` with the inventory above, on a migrated ledger, the warm-up
    guard on a real Redis (`redis=` another URL)."""
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(INVENTORY)

    def run(group: str, *args: str, redis: str = redis_url) -> CompletedProcess[str]:
        return cli("--inventory", str(inventory), "--redis-url", redis, group, "--database-url", database_url, *args,
                   cwd=tmp_path)

    migrated = run("sender", "migrate")
    assert migrated.returncode == 0, migrated.stderr
    return run


def _file(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _apply(sendhost: Cli, tmp_path: Path, name: str = "q1", text: str | None = None) -> CompletedProcess[str]:
    result = sendhost("campaign", "apply", str(_file(tmp_path, f"{name}.yml", text or CAMPAIGN.format(name=name))))
    assert result.returncode == 0, result.stderr
    return result


def _add(sendhost: Cli, tmp_path: Path, name: str, rows: str, *args: str) -> CompletedProcess[str]:
    return sendhost("campaign", "add-leads", name, str(_file(tmp_path, f"{name}.csv", LEADS + rows)), *args)


def _ready(sendhost: Cli, tmp_path: Path, rows: str = "eve@bigco.example,crm-4127,,Eve\n") -> None:
    """Campaign q1 with the leads `rows`, started."""
    _apply(sendhost, tmp_path)
    assert _add(sendhost, tmp_path, "q1", rows).returncode == 0
    assert sendhost("campaign", "start", "q1").returncode == 0


def _send(database_url: str, mailbox: str = BOX1) -> int:
    """An agent's send of the one due row through `mailbox`; the row's id."""
    with Ledger.from_url(database_url) as ledger:
        (row,) = ledger.claim("w", 1, ["sales"], [mailbox])
        outcome, _ = ledger.begin_attempt(row.id, uuid.uuid4(), mailbox, None, f"<{uuid.uuid4()}@sender.example>",
                                          "Hello Eve")
        assert outcome == "ok" and ledger.record_sent(row.id, "250 ok")
    return row.id


def _sql(database_url: str, statement: str, *params: object) -> list[tuple[object, ...]]:
    with psycopg.connect(database_url) as conn:
        cursor = conn.execute(statement, params)
        return cursor.fetchall() if cursor.description is not None else []


def _table_rows(stdout: str, rule: str = "│") -> list[str]:
    """The body rows (with rule "┃": the headers) of the tables in `stdout`, cells joined by ` | `."""
    return [" | ".join(cell.strip() for cell in line.strip().strip(rule).split(rule))
            for line in stdout.splitlines() if line.startswith(rule)]


def _one_line_error(result: CompletedProcess[str], code: int = 2) -> str:
    assert result.returncode == code, result.stdout + result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr, result.stderr
    return result.stderr.strip()


# --- apply ---------------------------------------------------------------------------------------------------------


def test_apply_creates_then_finds_it_unchanged_then_lists_the_changes(sendhost: Cli, tmp_path: Path,
                                                                     database_url: str) -> None:
    created = _apply(sendhost, tmp_path)
    assert created.stdout.startswith("campaign q1: created (3 steps, group sales, draft); next: `sendhost campaign "
                                     "add-leads q1 LEADS.csv`")
    assert _apply(sendhost, tmp_path).stdout == "campaign q1: unchanged\n"
    assert _add(sendhost, tmp_path, "q1", "eve@bigco.example,,,Eve\n").returncode == 0
    changed = CAMPAIGN.format(name="q1").replace("delay: 3d", "delay: 2d").replace('"Hello {first_name|there}"',
                                                                                  '"Hi again"')
    updated = _apply(sendhost, tmp_path, text=changed)
    assert updated.stdout == ("campaign q1: updated; the changes apply to steps not queued yet (a step already queued "
                              "keeps the text it was queued with):\n"
                              "  steps[1].subject: 'Hello {first_name|there}' -> 'Hi again'\n"
                              "  steps[2].delay: 3d -> 2d\n")
    assert _sql(database_url, "SELECT s.step, s.delay_s, s.subject FROM sender_campaign_steps s JOIN "
                "sender_campaigns c ON c.id = s.campaign_id WHERE c.name = 'q1' AND s.step < 3 ORDER BY 1") == [
        (1, 0, "Hi again"), (2, 2 * 86400, None)]
    # the lead's step 1 was queued before the change: it keeps its subject
    assert _sql(database_url, "SELECT subject FROM sender_emails WHERE address = 'eve@bigco.example'") == [
        ("Hello {first_name|there}",)]


def test_apply_json(sendhost: Cli, tmp_path: Path) -> None:
    path = _file(tmp_path, "q1.yml", CAMPAIGN.format(name="q1"))
    first = sendhost("campaign", "apply", str(path), "--format", "json")
    assert json.loads(first.stdout) == {"campaign": "q1", "outcome": "created", "changes": []}
    path.write_text(CAMPAIGN.format(name="q1").replace("delay: 4d", "delay: 5d"))
    second = sendhost("campaign", "apply", str(path), "--format", "json")
    assert json.loads(second.stdout) == {"campaign": "q1", "outcome": "updated",
                                         "changes": ["steps[3].delay: 4d -> 5d"]}


@pytest.mark.parametrize(("change", "expected"), [
    (("fields: [first_name]", "fields: [first_name]\ncolour: blue"), "q1.yml:4: colour: unknown key"),
    (("delay: 3d", "delay: soon"), "q1.yml:7: steps[2].delay: 'soon' is not a duration"),
    (('body: "Following up"', 'body: "Following up, {frist_name}"'),
     "q1.yml:8: steps[2].body: unknown merge field {frist_name}"),
    (("group: sales", "group: marketing"),
     "q1.yml:2: group: no mailbox is in group 'marketing'; the inventory's mailbox groups are sales, support"),
    # the pacing keys' bad input of issue 25
    (("fields: [first_name]", 'fields: [first_name]\nwindow: {days: [mon], hours: ["25:00-26:00"]}'),
     "q1.yml:4: window.hours: '25:00-26:00' is not a range of local times"),
    (("fields: [first_name]", "fields: [first_name]\ntimezone: Europe/Berlyn"),
     "q1.yml:4: timezone: 'Europe/Berlyn' is not an IANA time zone"),
    (("fields: [first_name]", 'fields: [first_name]\nwindow: {days: [mon], hours: ["09:00-12:00", "11:00-13:00"]}'),
     "q1.yml:4: window.hours: 11:00-13:00 overlaps 09:00-12:00"),
    (("fields: [first_name]", "fields: [first_name]\ndaily_cap: 0"), "q1.yml:4: daily_cap: 0 is outside 1..1000000"),
], ids=["unknown-key", "delay-not-a-duration", "unknown-merge-field", "group-no-mailbox-has", "window-25h",
        "unknown-time-zone", "overlapping-ranges", "cap-below-1"])
def test_a_bad_campaign_file_exits_2_naming_the_line_and_applies_nothing(
        sendhost: Cli, tmp_path: Path, database_url: str, change: tuple[str, str], expected: str) -> None:
    path = _file(tmp_path, "q1.yml", CAMPAIGN.format(name="q1").replace(*change))
    message = _one_line_error(sendhost("campaign", "apply", str(path)))
    assert message.startswith(f"error: {tmp_path / expected}"), message
    assert _sql(database_url, "SELECT name FROM sender_campaigns WHERE kind = 'file'") == []


# --- add-leads -----------------------------------------------------------------------------------------------------

ROWS = ("ann@rcpt.example,crm-1,America/New_York,Ann\n"  # line 2: added
        "gone@rcpt.example,crm-2,,Gone\n"  # 3: suppressed; its time zone empty
        "Eve@Bigco.example,crm-3,Mars/Olympus,Eve\n"  # 4: in campaign `other`; its time zone not a real one
        "ANN@rcpt.example,crm-4,,Ann\n"  # 5: line 2 again
        "bob@rcpt.example,crm-5,Europe/Berlin,Bob\n")  # 6: added


def _other_campaign_has_eve(sendhost: Cli, tmp_path: Path) -> None:
    _apply(sendhost, tmp_path, "other")
    assert _add(sendhost, tmp_path, "other", "eve@bigco.example,,,Eve\n").returncode == 0
    assert sendhost("campaign", "start", "other").returncode == 0


def test_add_leads_reports_each_outcome_and_a_second_run_adds_nothing(sendhost: Cli, tmp_path: Path,
                                                                      database_url: str) -> None:
    assert sendhost("sender", "suppress", "gone@rcpt.example").returncode == 0
    _other_campaign_has_eve(sendhost, tmp_path)
    _apply(sendhost, tmp_path)
    first = _add(sendhost, tmp_path, "q1", ROWS)
    assert first.returncode == 0, first.stderr
    assert first.stdout == (
        "campaign q1: 2 added (first at line 2), 0 already in this campaign, 1 suppressed (first at line 3), "
        "1 in another active campaign (first at line 4, in campaign other)\n"
        f"{tmp_path / 'q1.csv'}: 5 rows; 1 duplicate(s) of an earlier row, not added (line 5 repeats line 2); "
        "2 time zone(s) defaulted to the campaign's UTC (1 empty at line 3, 1 not an IANA name at line 4 "
        '"Mars/Olympus")\n')
    again = _add(sendhost, tmp_path, "q1", ROWS)
    assert again.stdout.splitlines()[0] == (
        "campaign q1: 0 added, 2 already in this campaign (first at line 2), 1 suppressed (first at line 3), "
        "1 in another active campaign (first at line 4, in campaign other)")
    assert _sql(database_url, "SELECT l.address, l.lead, l.timezone FROM sender_leads l JOIN sender_campaigns c "
                "ON c.id = l.campaign_id WHERE c.name = 'q1' ORDER BY l.id") == [
        ("ann@rcpt.example", "crm-1", "America/New_York"), ("bob@rcpt.example", "crm-5", "Europe/Berlin")]


def test_add_leads_names_the_first_lines_whose_time_zone_was_defaulted(sendhost: Cli, tmp_path: Path) -> None:
    _apply(sendhost, tmp_path)
    typo = "Europe/" + "Berlinn" * 10  # a long value is shown cut, never whole
    rows = "".join(f"a{n}@rcpt.example,,{'' if n < 7 else typo},A\n" for n in range(8))
    result = _add(sendhost, tmp_path, "q1", rows)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[1] == (
        f"{tmp_path / 'q1.csv'}: 8 rows; 8 time zone(s) defaulted to the campaign's UTC (7 empty at lines 2, 3, 4, "
        f'5, 6, ..., 1 not an IANA name at line 9 "{typo[:40]}...")')


def test_add_leads_json(sendhost: Cli, tmp_path: Path) -> None:
    assert sendhost("sender", "suppress", "gone@rcpt.example").returncode == 0
    _other_campaign_has_eve(sendhost, tmp_path)
    _apply(sendhost, tmp_path)
    result = _add(sendhost, tmp_path, "q1", ROWS, "--format", "json")
    assert json.loads(result.stdout) == {
        "campaign": "q1", "file": str(tmp_path / "q1.csv"), "rows": 5, "added": 2, "already": 0, "suppressed": 1,
        "other_campaign": 1, "first_lines": {"added": 2, "suppressed": 3, "other_campaign": 4},
        "other_campaign_first": "other", "duplicates": 1,
        "duplicate_lines": [[5, 2]], "timezone_defaulted": 2, "timezone_absent": 1, "timezone_invalid": 1,
        "timezone": "UTC", "timezone_absent_lines": [3], "timezone_invalid_lines": [[4, "Mars/Olympus"]]}


def test_the_same_person_spelled_otherwise_in_a_second_campaign_is_refused(sendhost: Cli, tmp_path: Path,
                                                                          database_url: str) -> None:
    _other_campaign_has_eve(sendhost, tmp_path)
    _apply(sendhost, tmp_path)
    result = _add(sendhost, tmp_path, "q1", "Eve@Bigco.example,,,Eve\n")
    assert result.stdout.splitlines()[0] == ("campaign q1: 0 added, 0 already in this campaign, 0 suppressed, "
                                             "1 in another active campaign (first at line 2, in campaign other)")
    assert _sql(database_url, "SELECT c.name FROM sender_leads l JOIN sender_campaigns c ON c.id = l.campaign_id "
                "WHERE l.address = 'eve@bigco.example'") == [("other",)]


@pytest.mark.parametrize(("rows", "expected"), [
    ("ann@rcpt.example,,,Ann\nEve <eve@bigco.example>,,,Eve\n", "q1.csv:3: address: 'Eve <eve@bigco.example>' is not "
                                                               "a plain address"),
    ("ann@rcpt.example,,,Ann\nbob@rcpt.example,,,Bob,extra\n", "q1.csv:3: row: 5 values for 4 columns"),
], ids=["display-name", "too-many-values"])
def test_a_bad_csv_row_exits_2_naming_its_line_and_imports_nothing(sendhost: Cli, tmp_path: Path, database_url: str,
                                                                   rows: str, expected: str) -> None:
    _apply(sendhost, tmp_path)
    message = _one_line_error(_add(sendhost, tmp_path, "q1", rows))
    assert message.startswith(f"error: {tmp_path / expected}"), message
    assert _sql(database_url, "SELECT count(*) FROM sender_leads l JOIN sender_campaigns c ON c.id = l.campaign_id "
                "WHERE c.name = 'q1'") == [(0,)]


def test_add_leads_to_an_unknown_campaign_names_it_and_apply(sendhost: Cli, tmp_path: Path) -> None:
    message = _one_line_error(_add(sendhost, tmp_path, "nope", "ann@rcpt.example,,,Ann\n"))
    assert message == "error: no campaign 'nope'; create it first with `sendhost campaign apply FILE.yml`"


# --- start, pause, resume, stop ------------------------------------------------------------------------------------


def _due(database_url: str) -> int:
    with Ledger.from_url(database_url) as ledger:
        claimed = ledger.claim("w", 10, ["sales"])
        for row in claimed:
            ledger.unclaim(row.id)
    return len(claimed)


def test_start_pause_resume_stop_and_the_moves_a_state_refuses(sendhost: Cli, tmp_path: Path,
                                                               database_url: str) -> None:
    _apply(sendhost, tmp_path)
    assert _add(sendhost, tmp_path, "q1", "ann@rcpt.example,,,Ann\n").returncode == 0
    assert _one_line_error(sendhost("campaign", "pause", "q1")) == (
        "error: pause q1: the ledger refused it: campaign q1 is draft: it cannot pause; a draft is started: "
        "`sendhost campaign start q1`")
    assert _due(database_url) == 0
    assert sendhost("campaign", "start", "q1").stdout == "campaign q1: running\n"
    assert _due(database_url) == 1
    assert sendhost("campaign", "pause", "q1").stdout == "campaign q1: paused\n"
    assert _due(database_url) == 0
    assert _one_line_error(sendhost("campaign", "start", "q1")) == (  # `start` is a draft's: say what resumes it
        "error: start q1: the ledger refused it: campaign q1 is paused: it cannot start; `start` is for a draft: "
        "`sendhost campaign resume q1` runs it again")
    resumed = sendhost("campaign", "resume", "q1", "--format", "json")
    assert json.loads(resumed.stdout) == {"campaign": "q1", "state": "running"}
    assert _due(database_url) == 1
    assert sendhost("campaign", "stop", "q1").stdout == "campaign q1: stopped\n"
    assert _due(database_url) == 0
    assert _one_line_error(sendhost("campaign", "start", "q1")) == (
        "error: start q1: the ledger refused it: campaign q1 is stopped: it cannot start; a stopped campaign stays "
        "stopped: apply a new one to send again")
    assert _one_line_error(sendhost("campaign", "resume", "nope")) == (
        "error: resume nope: the ledger refused it: no campaign nope; `sendhost campaign status` lists them")


# --- status --------------------------------------------------------------------------------------------------------


def _status_world(sendhost: Cli, tmp_path: Path, database_url: str) -> None:
    """q1 with two leads: ann's step 1 sent through BOX1 (so her step 2 waits for it), then replied to."""
    _ready(sendhost, tmp_path, "ann@rcpt.example,,,Ann\nbob@rcpt.example,,,Bob\n")
    first = _send(database_url)
    with Feedback.from_url(database_url) as feedback:
        feedback.apply(first, Event.REPLIED, source="inbox", ref="r1")
    _apply(sendhost, tmp_path, "later")


def test_status_shows_a_table_per_step_and_per_mailbox(sendhost: Cli, tmp_path: Path, database_url: str) -> None:
    _status_world(sendhost, tmp_path, database_url)
    result = sendhost("campaign", "status", "q1")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == "campaign q1: running, group sales, 2 lead(s); sequences ended: replied 1"
    assert _table_rows(result.stdout, "┃") == [
        "step | waiting | queued | sent | replied | bounced | unsubscribed | failed | unconfirmed | suppressed | "
        "cancelled", "step | mailbox | sent | delivered | replied | bounced | unsubscribed | clicked",
        "mailbox | sent | waiting follow-ups", "mailbox | day | sent | reserved | cap | state | q1 today"]
    assert _table_rows(result.stdout) == [
        "1 | 0 | 1 | 0 | 1 | 0 | 0 | 0 | 0 | 0 | 0",
        "2 | 0 | 0 | 0 | 0 | 0 | 0 | 0 | 0 | 0 | 1",
        "3 | 0 | 0 | 0 | 0 | 0 | 0 | 0 | 0 | 0 | 0",
        # what worked: ann's step 1, sent and replied to (a reply proves delivery), each over the rows sent
        f"1 | {BOX1} | 1 | 1 (100.0%) | 1 (100.0%) | 0 (0.0%) | 0 (0.0%) | 0 (0.0%)",
        f"{BOX1} | 1 | 0",  # mailbox | sent | waiting follow-ups (ann's step 2 was cancelled by her reply)
        # the group's mailboxes today: no agent has put them under the guard yet
        f"{BOX1} | - | - | - | - | not under the guard yet | -",
        f"{BOX2} | - | - | - | - | not under the guard yet | -",
    ]
    every = sendhost("campaign", "status")
    assert [line for line in every.stdout.splitlines() if line.startswith("campaign ")] == [
        "campaign later: draft, group sales, 0 lead(s); sequences ended: none",
        "campaign q1: running, group sales, 2 lead(s); sequences ended: replied 1"]


@pytest.mark.parametrize("columns", [100, 120])
def test_status_on_a_terminal_100_or_120_wide_breaks_no_word(sendhost: Cli, tmp_path: Path, database_url: str,
                                                            redis_url: str, columns: int) -> None:
    _status_world(sendhost, tmp_path, database_url)
    piped = sendhost("campaign", "status", "q1")
    shown = run_cli_on_terminal("--inventory", str(tmp_path / "inventory.yml"), "--redis-url", redis_url, "campaign",
                                "--database-url", database_url, "status", "q1", columns=columns, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "unsubscribed" in piped.stdout and BOX1 in piped.stdout
    assert words_cut(shown.stdout, piped.stdout) == []  # `unsubscrib|ed` and `box1@sender.exa|mple` once
    assert lines_wider_than(shown.stdout, columns) == []


def test_status_json(sendhost: Cli, tmp_path: Path, database_url: str) -> None:
    _status_world(sendhost, tmp_path, database_url)
    zero = dict.fromkeys(("waiting", "queued", "sent", "replied", "bounced", "unsubscribed", "failed",
                          "unconfirmed", "suppressed", "cancelled"), 0)
    one = json.loads(sendhost("campaign", "status", "q1", "--format", "json").stdout)
    # the inventory's mailboxes have no smtp settings: nothing could send, so no forecast (campaign forecast's tests)
    assert one.pop("forecast_today") == {"unavailable": "no mailbox of group sales with smtp settings in the inventory"}
    assert set(one.pop("pace")) == {"now", "due", "unknown", "campaign_cap", "mailbox_cap", "mailboxes"}
    # bob's step 1, the one row not sent yet, in the one line of its reason
    assert one.pop("waits") == {"rows": 1, "unknown": None, "window_closes": None,
                                "lines": [{"reason": "due", "rows": 1, "where": None, "until": None}]}
    assert one == {"name": "q1", "state": "running", "group": "sales", "leads": 2, "ended": {"replied": 1},
                   "steps": {"1": {**zero, "queued": 1, "replied": 1}, "2": {**zero, "cancelled": 1}, "3": zero},
                   "mailboxes": {BOX1: {"sent": 1, "waiting": 0}}, "window": None, "stalled": [],
                   "worked": [{"step": 1, "mailbox": BOX1, "sent": 1, "delivered": 1, "replied": 1, "bounced": 0,
                               "unsubscribed": 0, "clicked": 0,
                               "rates": {"delivered": 1.0, "replied": 1.0, "bounced": 0.0, "unsubscribed": 0.0,
                                         "clicked": 0.0}}]}
    every = json.loads(sendhost("campaign", "status", "--format", "json").stdout)
    assert [c["name"] for c in every] == ["later", "q1"]
    assert every[1].pop("forecast_today") is None  # today's forecast line is NAME's only
    assert {**every[1], "pace": None, "waits": None} == {**one, "pace": None, "waits": None}
    assert _one_line_error(sendhost("campaign", "status", "nope")).startswith("error: no campaign 'nope'")


def test_status_counts_the_rows_due_that_wait_for_the_window_and_when_it_opens(
        sendhost: Cli, tmp_path: Path) -> None:
    # closed now whatever the hour: yesterday, today and tomorrow are skipped (no `window`: every other day is open)
    today = datetime.now(UTC).date()
    skipped = ", ".join(str(today + timedelta(days=d)) for d in (-1, 0, 1))
    text = CAMPAIGN.format(name="q1") + f"timezone: America/New_York\nskip_dates: [{skipped}]\n"
    _apply(sendhost, tmp_path, "q1", text)
    assert _add(sendhost, tmp_path, "q1", "ann@rcpt.example,,,Ann\nbob@rcpt.example,,America/Chicago,Bob\n"
                ).returncode == 0
    assert sendhost("campaign", "start", "q1").returncode == 0
    shown = json.loads(sendhost("campaign", "status", "q1", "--format", "json").stdout)
    local_today = datetime.now(ZoneInfo("America/New_York")).date()
    # the earliest opening is New York's midnight after the skipped days, shown with New York's offset
    opens = datetime.fromisoformat(shown["window"]["opens"])
    assert shown["window"]["rows"] == 2
    assert shown["pace"]["due"] == 0  # waiting for the window is not due
    assert opens.utcoffset() == ZoneInfo("America/New_York").utcoffset(opens.replace(tzinfo=None))
    assert (opens.hour, opens.minute) == (0, 0) and opens.date() > local_today
    table = sendhost("campaign", "status", "q1").stdout
    assert f"q1: window closed now; it next opens {opens.isoformat(timespec='minutes')}\n" in table
    # each row in the one line of its lead's time zone, until that zone's midnight after the skipped days
    chicago = opens.astimezone(ZoneInfo("America/Chicago")) + timedelta(hours=1)
    assert ("q1: 2 row(s) not sent yet:\n"
            f"  1 wait for their window (America/New_York) until {opens:%a} 00:00 {opens.isoformat()[-6:]}\n"
            f"  1 wait for their window (America/Chicago) until {chicago:%a} 00:00 {chicago.isoformat()[-6:]}\n"
            ) in table


def test_a_paused_campaign_says_what_resumes_it_and_a_stopped_one_shows_no_window_or_pace(
        sendhost: Cli, tmp_path: Path) -> None:
    today = datetime.now(UTC).date()
    text = CAMPAIGN.format(name="q1") + f"skip_dates: [{today - timedelta(days=1)}, {today}, {today + timedelta(1)}]\n"
    _apply(sendhost, tmp_path, "q1", text)
    assert _add(sendhost, tmp_path, "q1", "ann@rcpt.example,,,Ann\n").returncode == 0
    assert sendhost("campaign", "start", "q1").returncode == 0
    running = sendhost("campaign", "status", "q1").stdout
    assert "q1: window closed now; it next opens " in running and "q1: campaign day " in running
    assert sendhost("campaign", "pause", "q1").returncode == 0
    paused = sendhost("campaign", "status", "q1").stdout
    assert "q1: 1 row(s) not sent yet:\n  1 wait for the campaign, which is paused (`sendhost campaign resume q1`)\n" \
        in paused
    assert sendhost("campaign", "stop", "q1").returncode == 0
    stopped = sendhost("campaign", "status", "q1").stdout
    assert "window" not in stopped and "campaign day" not in stopped and "q1: 0 row(s) not sent yet\n" in stopped


def _guarded(redis_url: str, *full: str) -> tuple[Guard, datetime]:
    """BOX1 and BOX2 under the warm-up guard as the inventory has them (an agent's start puts them there), the
    mailboxes `full` at today's cap (their send log shows a cap's worth today); the guard, and the sends' time."""
    guard = Guard.from_url(redis_url)
    now = datetime.now(UTC)
    for box in (BOX1, BOX2):
        guard.add_mailbox(box, start=date(2026, 11, 1), group="sales")
    for box in full:
        guard.import_sends([(box, now)] * guard.status([box])[0].cap, now=now.timestamp() + 1)
    return guard, now


def _shape_due(sendhost: Cli, db: str, guard: Guard, redis_client: redis.Redis) -> None:
    pass


def _shape_scheduled(sendhost: Cli, db: str, guard: Guard, redis_client: redis.Redis) -> None:
    _sql(db, "UPDATE sender_emails SET not_before = now() + interval '1 hour', due_at = now() + interval '1 hour'")


def _shape_window(sendhost: Cli, db: str, guard: Guard, redis_client: redis.Redis) -> None:
    _sql(db, "UPDATE sender_campaigns SET source = source || %s WHERE name = 'q1'",
         f"skip_dates: [{datetime.now(UTC).date() - timedelta(1)}, {datetime.now(UTC).date()}, "
         f"{datetime.now(UTC).date() + timedelta(1)}]\n")


def _shape_campaign_cap(sendhost: Cli, db: str, guard: Guard, redis_client: redis.Redis) -> None:
    _sql(db, "UPDATE sender_campaigns SET source = source || 'daily_cap: 1\n' WHERE name = 'q1'")
    redis_client.hset(GroupKeys("sales").campaign("q1"), mapping={"day": datetime.now(UTC).date().isoformat(),
                                                                   "day_count": 1})


def _shape_mailbox_paused(sendhost: Cli, db: str, guard: Guard, redis_client: redis.Redis) -> None:
    guard.pause(BOX1)
    guard.pause(BOX2)


def _shape_mailbox_cap(sendhost: Cli, db: str, guard: Guard, redis_client: redis.Redis) -> None:
    for box in (BOX1, BOX2):
        guard.import_sends([(box, datetime.now(UTC))] * guard.status([box])[0].cap, now=time_module.time() + 1)


def _shape_gap(sendhost: Cli, db: str, guard: Guard, redis_client: redis.Redis) -> None:
    for box in (BOX1, BOX2):
        decision = guard.pick([box])
        assert decision.reservation is not None
        guard.confirm(decision.reservation)


def _shape_backoff(sendhost: Cli, db: str, guard: Guard, redis_client: redis.Redis) -> None:
    _sql(db, "UPDATE sender_emails SET status = 'retry', attempts = 1, not_before = now() + interval '30 minutes'")


def _shape_put_back(sendhost: Cli, db: str, guard: Guard, redis_client: redis.Redis) -> None:
    _sql(db, "UPDATE sender_emails SET not_before = now() + interval '5 minutes'")


def _shape_sending(sendhost: Cli, db: str, guard: Guard, redis_client: redis.Redis) -> None:
    with Ledger.from_url(db) as ledger:
        assert ledger.claim("w", 1, ["sales"], [BOX1])


def _shape_campaign_paused(sendhost: Cli, db: str, guard: Guard, redis_client: redis.Redis) -> None:
    assert sendhost("campaign", "pause", "q1").returncode == 0


SHAPES = {"due": _shape_due, "scheduled": _shape_scheduled, "window": _shape_window,
          "campaign-cap": _shape_campaign_cap, "mailbox-paused": _shape_mailbox_paused,
          "mailbox-cap": _shape_mailbox_cap, "gap": _shape_gap, "backoff": _shape_backoff,
          "put-back": _shape_put_back, "sending": _shape_sending, "campaign-paused": _shape_campaign_paused}


@pytest.mark.parametrize("reason", list(SHAPES), ids=list(SHAPES))
def test_a_row_held_for_one_reason_is_in_exactly_that_line_of_campaign_status_and_lead_show(
        sendhost: Cli, tmp_path: Path, database_url: str, redis_url: str, redis_client: redis.Redis,
        reason: str) -> None:
    """Eve's one row, shaped as the agent, the guard or a person leaves it, in one line of `campaign status` and
    in her step's "waits for" in `lead show` (`waiting`, an earlier step not sent, has only unit tests: a campaign
    file's later step is made when the one before is sent)."""
    guard, _now = _guarded(redis_url)
    _ready(sendhost, tmp_path)
    SHAPES[reason](sendhost, database_url, guard, redis_client)
    shown = json.loads(sendhost("campaign", "status", "q1", "--format", "json").stdout)["waits"]
    assert [(line["reason"], line["rows"]) for line in shown["lines"]] == [(reason, 1)]
    assert shown["rows"] == 1
    (step,) = json.loads(sendhost("lead", "show", "eve@bigco.example", "--format", "json").stdout)["leads"][0]["steps"]
    assert step["waits_for"]["reason"] == reason
    table = sendhost("lead", "show", "eve@bigco.example").stdout
    assert f" | {step['waits_for']['text']} | " in _table_rows(table)[0]
    if reason in ("window", "campaign-cap", "mailbox-cap", "gap", "backoff", "put-back", "scheduled"):
        assert step["waits_for"]["until"] is not None and " until " in step["waits_for"]["text"]


def _pace(sendhost: Cli, name: str = "q1", **kw: str) -> dict[str, Any]:
    result = sendhost("campaign", "status", name, "--format", "json", **kw)
    assert result.returncode == 0, result.stderr
    pace: dict[str, Any] = json.loads(result.stdout)["pace"]
    return pace


def _utc_midnight_after(now: datetime) -> str:
    return datetime.combine(now.date() + timedelta(days=1), time(0), UTC).isoformat()


def test_status_shows_the_rows_due_and_each_mailbox_against_its_cap(sendhost: Cli, tmp_path: Path,
                                                                    redis_url: str) -> None:
    guard, now = _guarded(redis_url, BOX2)
    cap = guard.status([BOX1])[0].cap
    _ready(sendhost, tmp_path, "ann@rcpt.example,,,Ann\nbob@rcpt.example,,,Bob\n")
    pace = _pace(sendhost)
    # BOX1 has room, so neither row waits for a cap: both are due
    assert (pace["due"], pace["unknown"], pace["mailbox_cap"]["rows"], pace["campaign_cap"]["rows"]) == (2, None, 0, 0)
    assert pace["campaign_cap"] == {"day": now.date().isoformat(), "ends": _utc_midnight_after(now), "cap": None,
                                    "reserved": 0, "rows": 0}
    day = {"state": "ready", "day": now.date().isoformat(), "sent": 0, "reserved": 0, "cap": cap, "campaign": 0,
           "frees": None}
    assert pace["mailboxes"] == {  # numbers, not strings
        BOX1: day, BOX2: {**day, "state": "daily-limit", "sent": cap, "reserved": cap,
                          "frees": _utc_midnight_after(now)}}
    table = sendhost("campaign", "status", "q1").stdout
    assert "q1: 2 row(s) not sent yet:\n  2 are due now\n" in table
    assert f"q1: campaign day {now.date()}: 0 reserved (no daily cap)\n" in table
    assert f"{BOX2} | {now.date()} | {cap} | {cap} | {cap} | daily-limit | 0" in _table_rows(table)


def test_rows_wait_for_a_mailbox_cap_when_every_mailbox_they_may_use_is_at_it(
        sendhost: Cli, tmp_path: Path, database_url: str, redis_url: str) -> None:
    _guarded(redis_url, BOX1)
    _ready(sendhost, tmp_path, "ann@rcpt.example,,,Ann\nbob@rcpt.example,,,Bob\ncy@rcpt.example,,,Cy\n")
    _send(database_url)  # ann's step 1 went through BOX1: her step 2 waits for BOX1
    _sql(database_url, "UPDATE sender_emails SET not_before = now(), due_at = now() "
                       "WHERE address = 'ann@rcpt.example' AND step = 2")
    tomorrow = datetime.combine(datetime.now(UTC).date() + timedelta(days=1), time(0), UTC)
    pace = _pace(sendhost)
    # ann's step 2 may go only from BOX1, which is full; bob's and cy's step 1 may go from BOX2, which has room
    assert (pace["due"], pace["mailbox_cap"]["rows"]) == (2, 1)
    assert pace["mailbox_cap"]["until"] == tomorrow.isoformat()
    assert pace["mailboxes"][BOX1]["frees"] == tomorrow.isoformat()
    # BOX2 full too: every row waits for a cap now, and so does cy's, put back by the agent until BOX2 frees (as
    # it puts back a row the guard refused)
    guard = Guard.from_url(redis_url)
    guard.import_sends([(BOX2, datetime.now(UTC))] * guard.status([BOX2])[0].cap, now=time_module.time() + 1)
    _sql(database_url, "UPDATE sender_emails SET not_before = %s WHERE address = 'cy@rcpt.example'", tomorrow)
    pace = _pace(sendhost)
    assert (pace["due"], pace["mailbox_cap"]["rows"]) == (0, 3)
    table = sendhost("campaign", "status", "q1").stdout
    # a line per mailbox that frees first for its rows (BOX1 and BOX2 free at the same midnight: the first named)
    assert f"q1: 3 row(s) not sent yet:\n  3 wait for a mailbox's cap until {tomorrow:%a} 00:00 UTC, {BOX1}\n" \
        in table


def test_rows_wait_for_the_campaign_cap_once_its_day_count_reaches_it(
        sendhost: Cli, tmp_path: Path, redis_client: redis.Redis, redis_url: str) -> None:
    _guarded(redis_url)
    text = CAMPAIGN.format(name="q1") + "timezone: America/New_York\ndaily_cap: 3\nmax_per_mailbox_per_day: 2\n"
    _apply(sendhost, tmp_path, "q1", text)
    assert _add(sendhost, tmp_path, "q1", "ann@rcpt.example,,,Ann\nbob@rcpt.example,,,Bob\n").returncode == 0
    assert sendhost("campaign", "start", "q1").returncode == 0
    new_york = ZoneInfo("America/New_York")
    day = datetime.now(new_york).date()
    ends = datetime.combine(day + timedelta(days=1), time(0), new_york).isoformat()
    # the campaign's counters as the guard keeps them (the contract of warmup.keys.GroupKeys.campaign): 2 of 3 today
    key = GroupKeys("sales").campaign("q1")
    yesterday = day - timedelta(days=1)
    redis_client.hset(key, mapping={"day": day.isoformat(), "day_count": 2, "prev_day": yesterday.isoformat(),
                                    "prev_count": 3, f"mbx:{BOX1}": f"{day}|2", f"mbx:{BOX2}": f"{yesterday}|3"})
    pace = _pace(sendhost)
    # BOX1's share for q1 is spent (2 of 2): it frees when the campaign's day ends; BOX2's count is yesterday's
    assert (pace["mailboxes"][BOX1]["campaign"], pace["mailboxes"][BOX1]["frees"]) == (2, ends)
    assert (pace["mailboxes"][BOX2]["campaign"], pace["mailboxes"][BOX2]["frees"]) == (0, None)
    assert (pace["due"], pace["campaign_cap"]["reserved"], pace["campaign_cap"]["rows"]) == (2, 2, 0)
    assert pace["mailbox_cap"]["per_mailbox"] == 2
    redis_client.hset(key, "day_count", 3)
    pace = _pace(sendhost)
    assert (pace["due"], pace["campaign_cap"]["rows"], pace["mailbox_cap"]["rows"]) == (0, 2, 0)
    assert pace["campaign_cap"] == {"day": day.isoformat(), "ends": ends, "cap": 3, "reserved": 3, "rows": 2}
    assert datetime.fromisoformat(pace["now"]).utcoffset() == datetime.now(new_york).utcoffset()
    table = sendhost("campaign", "status", "q1").stdout
    assert f"q1: campaign day {day}: 3 of 3 reserved (the day ends {ends})" in table
    midnight = datetime.fromisoformat(ends)
    assert (f"q1: 2 row(s) not sent yet:\n  2 wait for the campaign's daily cap until {midnight:%a} 00:00 "
            f"{ends[-6:]}\n") in table


def test_status_says_it_could_not_look_at_the_caps_when_redis_is_down(sendhost: Cli, tmp_path: Path) -> None:
    _ready(sendhost, tmp_path)
    down = "redis://127.0.0.1:1"  # nothing listens on port 1
    pace = _pace(sendhost, redis=down)
    assert pace["unknown"].startswith("Redis unreachable")
    # unknown, not 0 or "fine": every count that needs the guard is null, and no mailbox is shown as having room
    assert (pace["campaign_cap"]["rows"], pace["campaign_cap"]["reserved"], pace["mailbox_cap"]["rows"],
            pace["mailboxes"]) == (None, None, None, {})
    assert pace["due"] == 1
    result = sendhost("campaign", "status", "q1", redis=down)
    assert result.returncode == 0, result.stderr
    assert "q1: what waits for a cap is unknown: couldn't look (Redis unreachable" in result.stdout
    assert "q1: 1 row(s) not sent yet (the mailboxes' part unknown: couldn't look, Redis unreachable" in result.stdout


def _stalled_world(sendhost: Cli, tmp_path: Path, database_url: str, redis_url: str) -> tuple[Guard, datetime]:
    """Ann's step 1 sent through BOX1, Bob's through BOX2, both their step 2 due two hours ago; then BOX1's login
    refused: the guard disconnects it, as the agent's send does (cancel with account_auth). The guard, and when
    Ann's step 2 became due."""
    guard, _now = _guarded(redis_url)
    _ready(sendhost, tmp_path, "ann@rcpt.example,,,Ann\nbob@rcpt.example,,,Bob\n")
    _send(database_url, BOX1)
    _send(database_url, BOX2)
    _sql(database_url, "UPDATE sender_emails SET not_before = now() - interval '2 hours', "
                       "due_at = now() - interval '2 hours' WHERE step = 2")
    decision = guard.pick([BOX1])
    assert decision.reservation is not None
    guard.cancel(decision.reservation, FailureClass.ACCOUNT_AUTH)
    ((due_at,),) = _sql(database_url, "SELECT due_at FROM sender_emails WHERE step = 2 AND pinned_mailbox = %s",
                        BOX1)
    assert isinstance(due_at, datetime)
    return guard, due_at


def test_status_names_the_follow_ups_stalled_behind_a_disconnected_mailbox_and_what_to_do(
        sendhost: Cli, tmp_path: Path, database_url: str, redis_url: str) -> None:
    """Issue 39: a follow-up pinned to a mailbox whose login was refused waited in 300 s loops for ever, and nothing
    named it. `campaign status` and `sender status` count it with its mailbox and since when it is due."""
    guard, due_at = _stalled_world(sendhost, tmp_path, database_url, redis_url)
    stalled = {"campaign": "q1", "mailbox": BOX1, "rows": 1, "state": "disconnected",
               "reason": "disconnected: authentication failed"}
    shown = json.loads(sendhost("campaign", "status", "q1", "--format", "json").stdout)["stalled"]
    assert [{k: v for k, v in s.items() if k != "due_since"} for s in shown] == [stalled]  # not BOX2's
    assert datetime.fromisoformat(shown[0]["due_since"]) == due_at
    since = due_at.isoformat(timespec="seconds")
    table = sendhost("campaign", "status", "q1").stdout
    assert (f"q1: 1 follow-up(s) due since {since} wait for {BOX1}, disconnected (disconnected: authentication "
            f"failed): fix its login, then `sendhost warmup resume {BOX1}`; or `sendhost campaign reassign q1 --from "
            f"{BOX1} --to OTHER_BOX`") in table
    status = sendhost("sender", "status", "--format", "json")
    assert status.returncode == 0, status.stderr
    listed = json.loads(status.stdout)["stalled_followups"]
    assert [{k: v for k, v in s.items() if k != "due_since"} for s in listed] == [stalled]
    rows = _table_rows(sendhost("sender", "status").stdout)
    assert f"q1 | {BOX1} | 1 | {since} | disconnected | disconnected: authentication failed" in rows
    guard.resume(BOX1)  # the login fixed: nothing stalls
    assert json.loads(sendhost("campaign", "status", "q1", "--format", "json").stdout)["stalled"] == []
    assert json.loads(sendhost("sender", "status", "--format", "json").stdout)["stalled_followups"] == []


def test_status_says_it_could_not_look_at_the_stalled_follow_ups_when_redis_does_not_answer(
        sendhost: Cli, tmp_path: Path, database_url: str, redis_url: str) -> None:
    _stalled_world(sendhost, tmp_path, database_url, redis_url)
    down = "redis://127.0.0.1:1/0"
    assert json.loads(sendhost("campaign", "status", "q1", "--format", "json", redis=down).stdout)["stalled"] is None
    status = sendhost("sender", "status", "--format", "json", redis=down)
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["stalled_followups"] is None
    table = sendhost("sender", "status", redis=down).stdout
    assert "follow-ups stalled behind a paused mailbox: unknown, couldn't look (Redis unreachable: " in table


# --- lead show -----------------------------------------------------------------------------------------------------


def test_lead_show_by_address_in_any_spelling(sendhost: Cli, tmp_path: Path, database_url: str) -> None:
    _ready(sendhost, tmp_path)
    first = _send(database_url)
    (message_id,) = _sql(database_url, "SELECT message_id FROM sender_emails WHERE id = %s", first)[0]
    result = sendhost("lead", "show", "EVE@Bigco.example")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == "campaign q1: crm-4127 <eve@bigco.example>; sequence going on"
    sent, waiting = _table_rows(result.stdout)
    assert sent.startswith("1 | sent | box1@sender.example | ") and sent.endswith(f" | {message_id}")
    assert waiting.startswith("2 | queued | box1@sender.example | ") and waiting.endswith(" | - | -")
    with Feedback.from_url(database_url) as feedback:
        feedback.apply(first, Event.REPLIED, source="inbox", ref="r1")
    ended = sendhost("lead", "show", "eve@bigco.example").stdout.splitlines()[0]
    assert ended.startswith("campaign q1: crm-4127 <eve@bigco.example>; sequence ended: replied at ")
    # an international domain is found only in its canonical (IDNA) form, which no lower() gives
    assert _add(sendhost, tmp_path, "q1", "zoe@bücher.example,,,Zoe\n").returncode == 0
    zoe = sendhost("lead", "show", "Zoe@BÜCHER.example")
    assert zoe.stdout.splitlines()[0] == "campaign q1: zoe@xn--bcher-kva.example; sequence going on", zoe.stderr


@pytest.mark.parametrize("columns", [100, 120])
def test_lead_show_on_a_terminal_100_or_120_wide_breaks_no_word(sendhost: Cli, tmp_path: Path, database_url: str,
                                                                redis_url: str, columns: int) -> None:
    _ready(sendhost, tmp_path, "eve@bigco.example,crm-4127,Asia/Tokyo,Eve\n")
    _send(database_url)
    piped = sendhost("lead", "show", "eve@bigco.example")
    assert "scheduled until " in piped.stdout and "due there (Asia/Tokyo)" in piped.stdout
    shown = run_cli_on_terminal("--inventory", str(tmp_path / "inventory.yml"), "--redis-url", redis_url, "lead",
                                "--database-url", database_url, "show", "eve@bigco.example", columns=columns,
                                cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert words_cut(shown.stdout, piped.stdout) == []
    assert lines_wider_than(shown.stdout, columns) == []


def test_lead_show_says_until_when_an_automatic_reply_holds_the_lead_on_its_clock(sendhost: Cli, tmp_path: Path,
                                                                                   database_url: str) -> None:
    _ready(sendhost, tmp_path, "eve@bigco.example,crm-4127,Europe/Berlin,Eve\n")
    first = _send(database_url)
    back = date.today() + timedelta(days=10)
    with Feedback.from_url(database_url) as feedback:
        feedback.apply(first, Event.AUTO_REPLIED, source="inbox", ref="ooo-1")
        feedback.hold(first, back, f"an automatic reply: back on {back - timedelta(days=1)}")
    head = sendhost("lead", "show", "eve@bigco.example").stdout.splitlines()[0]
    local = datetime.combine(back, time(), tzinfo=ZoneInfo("Europe/Berlin")).isoformat(sep=" ")
    assert head == (f"campaign q1: crm-4127 <eve@bigco.example>; sequence going on; held until {local} "
                    f"(Europe/Berlin): an automatic reply: back on {back - timedelta(days=1)}")
    (lead,) = json.loads(sendhost("lead", "show", "crm-4127", "--format", "json").stdout)["leads"]
    assert (lead["held_why"], lead["timezone"]) == (f"an automatic reply: back on {back - timedelta(days=1)}",
                                                    "Europe/Berlin")
    assert datetime.fromisoformat(lead["held_until"]) == datetime.combine(back, time(),
                                                                          tzinfo=ZoneInfo("Europe/Berlin"))


def test_lead_show_and_campaign_status_name_each_replys_verdict(sendhost: Cli, tmp_path: Path,
                                                                database_url: str) -> None:
    _apply(sendhost, tmp_path, text=CAMPAIGN.format(name="q1") + "stop_on_domain_reply: true\n")
    assert _add(sendhost, tmp_path, "q1", "eve@bigco.example,,,Eve\nann@acme.example,,,Ann\n").returncode == 0
    assert sendhost("campaign", "start", "q1").returncode == 0
    _send(database_url)
    _send(database_url)
    eve_row, ann_row = _sql(database_url, "SELECT id FROM sender_emails WHERE step = 1 ORDER BY address DESC")
    with Feedback.from_url(database_url) as feedback:
        feedback.apply(int(str(eve_row[0])), Event.LEFT, source="inbox", ref="left-1",
                       detail="no longer there or the wrong person (left/en); the reply names bob@bigco.example")
        assert feedback.colleague_reply(BOX1, "carl@acme.example", ref="c-1",
                                        detail="carl@acme.example replied")[0] == ann_row[0]
    eve = sendhost("lead", "show", "eve@bigco.example").stdout.splitlines()[0]
    assert eve.startswith("campaign q1: eve@bigco.example; sequence ended: left at ")
    assert eve.endswith("(no longer there or the wrong person (left/en); the reply names bob@bigco.example; never "
                        "mailed by themselves)")
    ann = sendhost("lead", "show", "ann@acme.example").stdout.splitlines()[0]
    assert ann.startswith("campaign q1: ann@acme.example; sequence ended: colleague_replied at ")
    assert ann.endswith("(carl@acme.example replied)")
    status = sendhost("campaign", "status", "q1")
    assert status.returncode == 0, status.stderr
    assert "lead(s); sequences ended: colleague_replied 1, left 1" in status.stdout.splitlines()[0]
    shown = json.loads(sendhost("campaign", "status", "q1", "--format", "json").stdout)
    assert shown["ended"] == {"colleague_replied": 1, "left": 1}


def test_lead_show_by_the_csv_lead_id_json_with_each_rows_history(sendhost: Cli, tmp_path: Path,
                                                                  database_url: str) -> None:
    _ready(sendhost, tmp_path)
    first = _send(database_url)
    shown = json.loads(sendhost("lead", "show", "crm-4127", "--format", "json").stdout)
    (lead,) = shown["leads"]
    assert (lead["campaign"], lead["address"], lead["lead"], lead["ended"]) == ("q1", "eve@bigco.example",
                                                                               "crm-4127", None)
    assert [(s["id"] == first, s["step"], s["status"], s["mailbox"]) for s in lead["steps"]] == [
        (True, 1, "sent", BOX1), (False, 2, "queued", BOX1)]
    assert lead["steps"][0]["message_id"] and lead["steps"][0]["sent_at"]
    history = [e["kind"] for e in lead["steps"][0]["history"]]
    assert history[0] == "waiting" and history[-1] == "sent", history
    assert lead["steps"][0]["history"][0]["detail"] == "added to campaign q1"


def test_lead_show_of_nobody_is_one_line_exit_1(sendhost: Cli, tmp_path: Path) -> None:
    _ready(sendhost, tmp_path)
    assert _one_line_error(sendhost("lead", "show", "nobody@bigco.example"), 1) == (
        "error: no lead 'nobody@bigco.example' in any campaign (looked for it as an address, a leads file's lead id "
        "and an enqueued lead)")


# --- reassign ------------------------------------------------------------------------------------------------------


def test_reassign_moves_the_follow_ups_and_refuses_a_mailbox_outside_the_group_unless_forced(
        sendhost: Cli, tmp_path: Path, database_url: str) -> None:
    _ready(sendhost, tmp_path)
    _send(database_url)
    moved = sendhost("campaign", "reassign", "q1", "--from", "Box1@Sender.example", "--to", BOX2)
    assert (moved.returncode, moved.stdout, moved.stderr) == (
        0, f"campaign q1: 1 row(s) moved from {BOX1} to {BOX2}\n", "")
    # no agent of this inventory sends from BOX3: its rows would wait for ever, so nothing moves
    refused = _one_line_error(sendhost("campaign", "reassign", "q1", "--from", BOX2, "--to", BOX3), 2)
    assert refused == (f"error: --to {BOX3}: {BOX3} is not a mailbox of group sales in the inventory ({BOX1}, "
                       f"{BOX2}), so no agent would send the moved steps; name a mailbox of group sales, or add "
                       "--force if the agents' inventory has it")
    assert _sql(database_url, "SELECT step, pinned_mailbox FROM sender_emails WHERE step = 2") == [(2, BOX2)]
    outside = sendhost("campaign", "reassign", "q1", "--from", BOX2, "--to", BOX3, "--force", "--format", "json")
    assert outside.returncode == 0 and json.loads(outside.stdout) == {"campaign": "q1", "from": BOX2, "to": BOX3,
                                                                      "moved": 1}
    assert outside.stderr == (f"warning: {BOX3} is not a mailbox of group sales in the inventory ({BOX1}, {BOX2}); "
                              "the moved steps wait until an agent that has it runs\n")
    assert _sql(database_url, "SELECT step, pinned_mailbox FROM sender_emails WHERE step = 2") == [(2, BOX3)]
    nothing = sendhost("campaign", "reassign", "q1", "--from", BOX1, "--to", BOX2)
    assert nothing.stdout == f"campaign q1: no step not sent yet waits for {BOX1}; nothing moved\n"
    assert _one_line_error(sendhost("campaign", "reassign", "nope", "--from", BOX1, "--to", BOX2)).startswith(
        "error: no campaign 'nope'")


# --- addresses: sender suppress, enqueue, show ---------------------------------------------------------------------


def _enqueue(sendhost: Cli, tmp_path: Path, rows: str) -> CompletedProcess[str]:
    path = _file(tmp_path, "enqueue.csv", "lead,step,address,group,subject,text\n" + rows)
    return sendhost("sender", "enqueue", str(path))


def test_suppress_a_whole_domain_and_addresses_in_canonical_form(sendhost: Cli, tmp_path: Path,
                                                                 database_url: str) -> None:
    assert _enqueue(sendhost, tmp_path, "L1,1,a@bigco.example,sales,Hi,x\nL2,1,B@BIGCO.example,sales,Hi,x\n"
                                        "L3,1,carol@other.example,sales,Hi,x\n").returncode == 0
    result = sendhost("sender", "suppress", "@BigCo.example", " Carol@Other.Example")
    assert result.stdout == ("@bigco.example: suppressed; 2 row(s) not sent yet withdrawn\n"
                             "carol@other.example: suppressed; 1 row(s) not sent yet withdrawn\n")
    assert _sql(database_url, "SELECT address FROM sender_suppressions ORDER BY 1") == [
        ("@bigco.example",), ("carol@other.example",)]
    assert _enqueue(sendhost, tmp_path, "L4,1,zed@bigco.example,sales,Hi,x\n").stdout.strip() == (
        "0 queued, 0 refused as duplicates, 1 refused as suppressed")


@pytest.mark.parametrize(("given", "expected"), [
    ("Eve <eve@bigco.example>", "'Eve <eve@bigco.example>' is not a plain address"),
    ("@bigco", "the domain 'bigco' is a single label"),
    ("bigco.example", "'bigco.example' has no @"),
])
def test_suppress_refuses_what_is_not_one_address_or_domain_and_writes_nothing(
        sendhost: Cli, database_url: str, given: str, expected: str) -> None:
    message = _one_line_error(sendhost("sender", "suppress", "ok@bigco.example", given))
    assert expected in message, message
    assert _sql(database_url, "SELECT count(*) FROM sender_suppressions") == [(0,)]


def test_sender_show_names_the_enqueue_campaigns_lead_unless_told_another(sendhost: Cli, tmp_path: Path) -> None:
    _ready(sendhost, tmp_path)
    # an enqueued lead whose id is the same text as the campaign's lead
    assert _enqueue(sendhost, tmp_path, "eve@bigco.example,1,eve@bigco.example,sales,Enqueued,x\n").returncode == 0
    enqueued = json.loads(sendhost("sender", "show", "eve@bigco.example", "1", "--format", "json").stdout)
    assert (enqueued["row"]["campaign"], enqueued["row"]["subject"]) == ("enqueue", "Enqueued")
    of_q1 = json.loads(sendhost("sender", "show", "Eve@Bigco.example", "1", "--campaign", "q1", "--format",
                                "json").stdout)
    assert (of_q1["row"]["campaign"], of_q1["row"]["subject"]) == ("q1", "Hello {first_name|there}")
    by_id = json.loads(sendhost("sender", "show", "crm-4127", "1", "--campaign", "q1", "--format", "json").stdout)
    assert (by_id["row"]["id"], by_id["row"]["lead"]) == (of_q1["row"]["id"], "crm-4127")  # the leads file's id
    assert _one_line_error(sendhost("sender", "show", "eve@bigco.example", "2", "--campaign", "q1"), 1).startswith(
        "error: no row for lead 'eve@bigco.example' step 2 in campaign 'q1'")
