"""`sendhost sender inbox` against a real IMAP server (dovecot, TLS from a trustme CA) and a real ledger: each
bounce, complaint, reply, out-of-office and unsubscribe mail lands on the right row; a second read changes nothing;
unrelated and malformed mail is left alone and counted; a refused login or an untrusted certificate is reported."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest

from sender.feedback.bounces import MessageKind, parse
from sender.ledger.events import Feedback
from sendhost.embedded import stop_embedded
from tests.conftest import REPO_ROOT
from tests.sender import inbox_samples as samples
from tests.sender.web_server import sent_row
from tests.support.dovecot import Dovecot, dovecot_server

BOX0, BOX1 = "box0@sender.example", "box1@sender.example"
PASSWORDS = {BOX0: "imap-pw-0", BOX1: "imap-pw-1"}

# (sample, the row's expected status, is its recipient suppressed?)
CASES: dict[str, tuple[Callable[[str, str], bytes], str, bool]] = {
    "postfix": (samples.postfix_hard, "bounced", True),
    "gmail": (samples.gmail_hard, "bounced", True),
    "microsoft": (samples.microsoft_hard, "bounced", True),
    "exim": (samples.exim_hard, "bounced", True),
    "qmail": (samples.qmail_hard, "bounced", True),
    "delayed": (samples.delayed_soft, "sent", False),
    "policy": (samples.policy_block, "sent", False),
    "docomo-filter": (samples.docomo_filter, "sent", False),
    "complaint": (samples.arf_complaint, "complained", True),
    "reply": (samples.reply, "replied", False),
    "reply-unthreaded": (samples.reply_without_threading, "replied", False),
    "out-of-office": (samples.out_of_office, "sent", False),
    "unsubscribe": (samples.unsubscribe_mail, "unsubscribed", True),
    "asked-to-stop-in-a-reply": (samples.stop_reply, "unsubscribed", True),
    "quoted-footer-is-no-request": (samples.reply_quoting_our_footer, "replied", False),
}
LEFT_ALONE = [samples.unrelated, samples.bounce_of_a_stranger, samples.malformed_report, samples.no_message_id_bounce]


@pytest.fixture(scope="module")
def imap() -> Iterator[Dovecot]:
    with dovecot_server(PASSWORDS) as server:
        yield server


def _inventory(tmp: Path, imap: Dovecot, *, box0_password: str | None = None, box1_ca: str | None = None,
               boxes: tuple[str, str] = (BOX0, BOX1), authserv_id: str | None = None, folder: str = "INBOX") -> Path:
    entries = []
    box0, box1 = boxes
    extra = (f", authserv_id: {authserv_id}" if authserv_id else "") + (f", folder: {folder}" if folder != "INBOX"
                                                                         else "")
    for address, password, security, port in ((box0, box0_password or imap.users[box0], "tls", imap.imaps_port),
                                              (box1, imap.users[box1], "starttls", imap.starttls_port)):
        secret = tmp / f"{address}.pw"
        secret.write_text(password + "\n")
        secret.chmod(0o600)
        ca = imap.ca_file if address == box0 or box1_ca is None else box1_ca
        entries.append(
            f"      - address: {address}\n        domain: sender.example\n        start: '2026-01-01'\n"
            f"        group: sales\n"
            f"        smtp: {{host: 127.0.0.1, port: 587, username: {address}, password_file: '{secret}'}}\n"
            f"        imap: {{host: 127.0.0.1, port: {port}, security: {security}, ca_file: '{ca}'{extra}}}\n")
    path = tmp / "inventory.yml"
    path.write_text("all:\n  vars:\n    sendhost_unsubscribe_base_url: https://u.example.test\n"
                    "    sendhost_mailboxes:\n" + "".join(entries) +
                    "  children:\n    senders:\n      hosts:\n        sender-1:\n"
                    "          sendhost_instance_id: i-0123456789abcdef0\n          sendhost_region: us-east-1\n"
                    "          sendhost_primary_ip: 127.0.0.1\n          sendhost_pool: {slots: 2}\n")
    return path


@pytest.fixture(autouse=True)
def _stop_the_embedded_redis(tmp_path: Path) -> Iterator[None]:
    """`sender inbox` starts the embedded Redis under the test's state dir, which outlives each command by design:
    stop it, so no test leaves a server behind."""
    yield
    stop_embedded(tmp_path / "state")


def _inbox(inventory: Path, database_url: str, tmp: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SENDHOST_STATE_DIR": str(tmp / "state"), "PYTHONPATH": str(REPO_ROOT)}
    return subprocess.run([sys.executable, "-c", "from toolkit.cli import main; main()", "--inventory",
                           str(inventory), "sender", "--database-url", database_url, "inbox", "--once", "--format",
                           "json"], capture_output=True, text=True, env=env, cwd=tmp, timeout=120, check=False)


def _state(database_url: str) -> tuple[object, ...]:
    with psycopg.connect(database_url) as conn:
        return tuple(conn.execute(q).fetchall() for q in (
            "SELECT l.lead, e.step, e.status::text FROM sender_emails e JOIN sender_leads l ON l.id = e.lead_id "
            "ORDER BY e.id",
            "SELECT address FROM sender_suppressions ORDER BY address",
            "SELECT email_id, event, ref FROM sender_feedback ORDER BY id",
            "SELECT count(*) FROM sender_events"))


def _status(feedback: Feedback, lead: str, step: int = 1) -> str:
    shown = feedback.ledger.show(lead, step)
    assert shown is not None
    return str(shown.row["status"])


def test_each_message_lands_on_its_row_and_a_second_read_changes_nothing(
        imap: Dovecot, feedback: Feedback, database_url: str, tmp_path: Path) -> None:
    leads = {}
    for n, (name, (sample, _expected, _suppressed)) in enumerate(CASES.items()):
        box = BOX0 if n % 2 == 0 else BOX1
        lead = f"lead{n}@rcpt.example"
        _row, message_id = sent_row(feedback, name, lead, mailbox=box)
        if name.startswith("reply"):  # stop on reply: the later step must be withdrawn
            feedback.ledger.enqueue(lead=name, step=2, address=lead, group="sales", subject="Again", text="x",
                                 not_before=datetime.now(UTC) + timedelta(days=3))
        leads[name] = lead
        imap.append(box, sample(message_id, lead))
    for n, sample in enumerate(LEFT_ALONE):
        imap.append(BOX0 if n % 2 else BOX1, sample("<unknown@sender.example>", "nobody@rcpt.example"))
    inventory = _inventory(tmp_path, imap)

    first = _inbox(inventory, database_url, tmp_path)
    assert first.returncode == 0, first.stderr
    for name, (_sample, status, suppressed) in CASES.items():
        assert (name, _status(feedback, name), feedback.ledger.is_suppressed(leads[name])) == (name, status, suppressed)
    assert [_status(feedback, name, 2) for name in ("reply", "reply-unthreaded")] == ["cancelled", "cancelled"]
    report = {m["mailbox"]: m for m in json.loads(first.stdout)["mailboxes"]}
    total: dict[str, int] = {}
    for mailbox in report.values():
        assert mailbox["error"] is None
        for key, n in mailbox["outcomes"].items():
            total[key] = total.get(key, 0) + n
    assert total["applied"] == len(CASES)
    assert (total["unmatched"], total["malformed"]) == (3, 1)
    assert (total["bounced"], total["deferred"], total["auto_replied"]) == (5, 3, 1)

    before = _state(database_url)
    second = _inbox(inventory, database_url, tmp_path)
    assert second.returncode == 0, second.stderr
    assert all(m["outcomes"] == {} for m in json.loads(second.stdout)["mailboxes"])
    assert _state(database_url) == before

    # Forget the marks (a reader restored from an old backup): every message is read again, nothing changes.
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("DELETE FROM sender_inbox_marks")
    third = _inbox(inventory, database_url, tmp_path)
    assert third.returncode == 0, third.stderr
    replays = sum(m["outcomes"].get("replay", 0) for m in json.loads(third.stdout)["mailboxes"])
    assert replays == len(CASES)
    assert _state(database_url) == before


@pytest.mark.slow
def test_a_refused_login_is_reported_and_the_other_mailbox_still_read(
        imap: Dovecot, feedback: Feedback, database_url: str, tmp_path: Path) -> None:
    _row, message_id = sent_row(feedback, "L1", "late@rcpt.example", mailbox=BOX1)
    imap.append(BOX1, samples.reply(message_id, "late@rcpt.example"))
    result = _inbox(_inventory(tmp_path, imap, box0_password="wrong"), database_url, tmp_path)
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    report = {m["mailbox"]: m for m in json.loads(result.stdout)["mailboxes"]}
    assert "login" in report[BOX0]["error"] and report[BOX0]["outcomes"] == {}
    assert report[BOX1]["error"] is None and _status(feedback, "L1") == "replied"
    assert feedback.inbox_mark(BOX0) is None


def test_an_untrusted_certificate_is_refused_before_any_login(
        imap: Dovecot, feedback: Feedback, database_url: str, tmp_path: Path) -> None:
    import trustme

    other_ca = tmp_path / "other-ca.pem"
    trustme.CA().cert_pem.write_to_path(str(other_ca))
    result = _inbox(_inventory(tmp_path, imap, box1_ca=str(other_ca)), database_url, tmp_path)
    assert result.returncode == 1
    report = {m["mailbox"]: m for m in json.loads(result.stdout)["mailboxes"]}
    assert "certificate" in report[BOX1]["error"].lower()
    assert feedback.inbox_mark(BOX1) is None


@pytest.mark.parametrize("raw", [b"", b"\x00\xff garbage", b"Content-Type: multipart/report; boundary=x\r\n\r\n--x",
                                 b"From: a\r\nContent-Type: message/delivery-status\r\n\r\nStatus: 9.9.9\r\n"])
def test_garbage_never_raises(raw: bytes) -> None:
    assert parse(raw).kind in set(MessageKind)


def test_the_agent_reads_the_inbox_on_an_interval(imap: Dovecot, feedback: Feedback, database_url: str,
                                                  tmp_path: Path) -> None:
    import threading
    import time

    from toolkit.app import App
    from toolkit.cli.sender.context import SenderContext
    from toolkit.cli.sender.feedback import start_inbox_reader

    _row, message_id = sent_row(feedback, "L1", "agent@rcpt.example", mailbox=BOX0)
    context = SenderContext(App(inventory_flag=str(_inventory(tmp_path, imap)), env={}), database_url)
    stop = threading.Event()
    start_inbox_reader(context, stop, every_s=0.2)
    try:
        imap.append(BOX0, samples.reply(message_id, "agent@rcpt.example"))  # arrives while the agent runs
        deadline = time.monotonic() + 30
        while _status(feedback, "L1") != "replied" and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        stop.set()
    assert _status(feedback, "L1") == "replied"
