"""`sendhost sender migrate|enqueue|suppress|status|show`, run as a user runs them, on a real PostgreSQL."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from subprocess import CompletedProcess

import pytest

from sender import Ledger

Cli = Callable[..., CompletedProcess[str]]
HEADER = "lead,step,address,group,subject,text,not_before\n"


@pytest.fixture
def sender_cli(cli: Cli, database_url: str, tmp_path: Path) -> Callable[..., CompletedProcess[str]]:
    def run(*args: str, inventory: Path | None = None) -> CompletedProcess[str]:
        extra = ("--inventory", str(inventory)) if inventory else ()
        return cli(*extra, "sender", "--database-url", database_url, *args, cwd=tmp_path)
    result = run("migrate")
    assert result.returncode == 0, result.stderr
    return run


def _csv(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "leads.csv"
    path.write_text(HEADER + body)
    return path


def test_enqueue_counts_queued_duplicates_and_suppressed(sender_cli: Cli, tmp_path: Path) -> None:
    assert sender_cli("suppress", "gone@example.com", "--reason", "bounced").returncode == 0
    path = _csv(tmp_path, "L1,1,a@example.com,sales,Hi,\"Hello, there\",\nL1,1,a@example.com,sales,Hi,x,\n"
                          "L2,1,gone@example.com,sales,Hi,x,2026-12-01T09:00:00+00:00\n")
    result = sender_cli("enqueue", str(path))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "1 queued, 1 refused as duplicates, 1 refused as suppressed"
    result = sender_cli("enqueue", str(path), "--format", "json")
    assert json.loads(result.stdout) == {"queued": 0, "duplicate": 2, "suppressed": 1}


def test_enqueue_refuses_a_second_lead_id_of_one_person_naming_the_first(sender_cli: Cli, tmp_path: Path,
                                                                         database_url: str) -> None:
    path = _csv(tmp_path, "crm-1,1,ana@rcpt.example,sales,Hi,x,\nbob,1,bob@rcpt.example,sales,Hi,x,\n"
                          "crm-2,1,Ana@RCPT.example,sales,Hi,x,\n")
    result = sender_cli("enqueue", str(path))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == (
        "2 queued, 0 refused as duplicates, 0 refused as suppressed, 1 refused as same-person (first at line 4: "
        "lead crm-2 is ana@rcpt.example, as lead crm-1 is; --allow-same-person queues it)")
    with Ledger.from_url(database_url) as ledger:
        assert ledger.show("crm-2", 1) is None
    result = sender_cli("enqueue", str(path), "--format", "json")
    assert json.loads(result.stdout) == {"queued": 0, "duplicate": 2, "suppressed": 0, "same_person": 1,
                                         "same_person_first": {"line": 4, "lead": "crm-2", "same_as": "crm-1"}}
    allowed = sender_cli("enqueue", str(path), "--allow-same-person")
    assert allowed.stdout.strip() == "1 queued, 2 refused as duplicates, 0 refused as suppressed"
    with Ledger.from_url(database_url) as ledger:
        shown = ledger.show("crm-2", 1)
    assert shown is not None and shown.row["address"] == "ana@rcpt.example"


def test_enqueue_stores_the_canonical_address(sender_cli: Cli, tmp_path: Path, database_url: str) -> None:
    result = sender_cli("enqueue", str(_csv(tmp_path, "L1,1, Bob@Bücher.Example ,sales,Hi,x,\n")))
    assert result.returncode == 0, result.stderr
    with Ledger.from_url(database_url) as ledger:
        shown = ledger.show("L1", 1)
    assert shown is not None and shown.row["address"] == "bob@xn--bcher-kva.example"


def test_status_json_lists_every_status(sender_cli: Cli, tmp_path: Path) -> None:
    sender_cli("enqueue", str(_csv(tmp_path, "L1,1,a@example.com,sales,Hi,x,\n")))
    result = sender_cli("status", "--format", "json")
    assert result.returncode == 0, result.stderr
    shown = json.loads(result.stdout)
    waits = shown.pop("waits")
    assert shown == {"counts": {"waiting": 0, "queued": 1, "sending": 0, "sent": 0, "retry": 0,
                                                    "failed": 0,
                                                    "unconfirmed": 0, "suppressed": 0, "cancelled": 0,
                                                    "delivered": 0, "replied": 0, "bounced": 0, "unsubscribed": 0,
                                                    "complained": 0}, "health": [], "stalled_followups": []}
    # the one row not sent yet, in the one line of its reason (no inventory: no mailbox of `sales` holds it)
    assert waits["enqueue"]["rows"] == 1
    assert waits["enqueue"]["lines"] == [{"reason": "due", "rows": 1, "until": None, "where": None}]


def test_show_tells_the_rows_history(sender_cli: Cli, tmp_path: Path, database_url: str) -> None:
    sender_cli("enqueue", str(_csv(tmp_path, "L7,2,a@example.com,sales,Hi,x,\n")))
    with Ledger.from_url(database_url) as ledger:
        ledger.suppress("a@example.com", "replied: not interested")
    result = sender_cli("show", "L7", "2", "--format", "json")
    assert result.returncode == 0, result.stderr
    shown = json.loads(result.stdout)
    assert shown["row"]["status"] == "suppressed"
    assert [e["kind"] for e in shown["events"]] == ["waiting", "suppressed"]  # step 2 waits for step 1
    assert shown["events"][1]["detail"] == "replied: not interested"
    missing = sender_cli("show", "L8", "1")
    assert missing.returncode == 1 and "no row for lead 'L8' step 2" not in missing.stderr
    assert missing.stderr.startswith("error: no row for lead 'L8' step 1")


@pytest.mark.parametrize(("body", "expected"), [
    ("L1,1,a@example.com,sales,Hi,x,\nL2,two,b@example.com,sales,Hi,x,\n", "leads.csv:3: step: 'two' is not"),
    ("L1,1,not-an-address,sales,Hi,x,\n", "leads.csv:2: address: 'not-an-address' has no @"),
    ("L1,1,Eve <a@example.com>,sales,Hi,x,\n", "leads.csv:2: address: 'Eve <a@example.com>' is not a plain address"),
    ("L1,1,a@localhost,sales,Hi,x,\n", "leads.csv:2: address: 'a@localhost': the domain 'localhost' is a single label"),
    ("L1,1,a@example.com,sales,Hi,x,tomorrow\n", "leads.csv:2: not_before: 'tomorrow' is not a time"),
    ("L1,1,a@example.com,sales,Hi,x,,extra\n", "leads.csv:2: row: "),
    (",1,a@example.com,sales,Hi,x,\n", "leads.csv:2: lead: empty"),
])
def test_malformed_rows_write_nothing(sender_cli: Cli, tmp_path: Path, body: str, expected: str) -> None:
    result = sender_cli("enqueue", str(_csv(tmp_path, body)))
    assert result.returncode == 2
    assert expected in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert json.loads(sender_cli("status", "--format", "json").stdout)["counts"]["queued"] == 0


def test_unknown_group_is_bad_input(sender_cli: Cli, tmp_path: Path) -> None:
    inventory = tmp_path / "inventory.yml"
    inventory.write_text("all:\n  vars:\n    sendhost_mailboxes:\n      - {address: a@ex.com, domain: ex.com, "
                         "start: '2026-11-01', group: sales}\n  children:\n    senders:\n      hosts: {}\n")
    result = sender_cli("enqueue", str(_csv(tmp_path, "L1,1,a@example.com,marketing,Hi,x,\n")), inventory=inventory)
    assert result.returncode == 2
    assert "group: unknown group 'marketing'; the inventory's mailbox groups are sales" in result.stderr


def test_unreachable_database_is_one_line_exit_1(cli: Cli, tmp_path: Path) -> None:
    result = cli("sender", "--database-url", "postgresql://postgres@127.0.0.1:1/ledger", "status", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr.startswith("error: database postgresql://postgres@127.0.0.1:1/ledger unreachable")
    assert len(result.stderr.strip().splitlines()) == 1


def test_unmigrated_database_says_run_migrate(cli: Cli, database_url: str, tmp_path: Path) -> None:
    result = cli("sender", "--database-url", database_url, "status", cwd=tmp_path)
    assert result.returncode == 2
    assert "run `sendhost sender migrate`" in result.stderr


def test_bad_url_and_env_precedence(cli: Cli, database_url: str, tmp_path: Path) -> None:
    result = cli("sender", "--database-url", "mysql://x", "status", cwd=tmp_path)
    assert result.returncode == 2 and "is not a PostgreSQL URL" in result.stderr
    assert cli("sender", "--database-url", database_url, "migrate", cwd=tmp_path).returncode == 0
    # the flag wins over the environment
    result = cli("sender", "--database-url", database_url, "status", cwd=tmp_path,
                 env={"SENDHOST_DATABASE_URL": "postgresql://postgres@127.0.0.1:1/x"})
    assert result.returncode == 0, result.stderr
    result = cli("sender", "status", cwd=tmp_path, env={"SENDHOST_DATABASE_URL": database_url})
    assert result.returncode == 0, result.stderr


def test_sweep_settles_what_a_dead_agent_left(sender_cli: Cli, tmp_path: Path, database_url: str) -> None:
    import uuid

    sender_cli("enqueue", str(_csv(tmp_path, "L1,1,a@example.com,sales,Hi,x,\nL2,1,b@example.com,sales,Hi,x,\n")))
    with Ledger.from_url(database_url) as ledger:
        _first, second = ledger.claim("dead", 2)
        ledger.begin_attempt(second.id, uuid.uuid4(), "m@example.com", None, "<x@example.com>")
    assert json.loads(sender_cli("sweep", "--format", "json").stdout) == {"requeued": 0, "unconfirmed": 0}
    result = sender_cli("sweep", "--older-than", "0s")
    assert result.stdout.strip() == "1 requeued (attempt never started), 1 unconfirmed (check Sent Items)"
    assert sender_cli("sweep", "--older-than", "soon").returncode == 2


def test_run_without_an_unsubscribe_url_is_bad_input(sender_cli: Cli, tmp_path: Path) -> None:
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(
        "all:\n  vars:\n    sendhost_mailboxes:\n      - {address: a@ex.com, domain: ex.com, start: '2026-11-01', "
        "smtp: {host: smtp.ex.com, username: a@ex.com, password_file: /nonexistent}}\n"
        "  children:\n    senders:\n      hosts:\n        s1: {sendhost_instance_id: i-0123456789abcdef0, "
        "sendhost_region: us-east-1, sendhost_primary_ip: 10.0.0.5, sendhost_pool: {slots: 1}}\n")
    result = sender_cli("run", "--once", inventory=inventory)
    assert result.returncode == 2
    assert "set sendhost_unsubscribe_base_url" in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_run_with_a_missing_secret_file_is_bad_input(sender_cli: Cli, tmp_path: Path) -> None:
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(
        "all:\n  vars:\n    sendhost_unsubscribe_base_url: https://u.ex.com\n"
        "    sendhost_mailboxes:\n      - {address: a@ex.com, domain: ex.com, start: '2026-11-01', "
        "smtp: {host: smtp.ex.com, username: a@ex.com, password_file: /nonexistent/a.pw}}\n"
        "  children:\n    senders:\n      hosts:\n        s1: {sendhost_instance_id: i-0123456789abcdef0, "
        "sendhost_region: us-east-1, sendhost_primary_ip: 10.0.0.5, sendhost_pool: {slots: 1}}\n")
    result = sender_cli("run", "--once", inventory=inventory)
    assert result.returncode == 2
    # the one credential reader (sendhost.model) names the mailbox and the settings the file is named in
    assert result.stderr.strip() == ("error: smtp password_file /nonexistent/a.pw of a@ex.com: No such file or "
                                     "directory; write the secret there (mode 0600)")
