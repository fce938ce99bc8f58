"""What strangers mail a sending mailbox, against a real IMAP server (dovecot) and a real ledger: hostile messages
never stop a pass and change nothing, next to real replies that are applied; feedback whose From fails DMARC at
the provider (under its authserv-id) changes nothing and is counted as forged, a header under another id is
ignored; one stranger cannot pause a mailbox; replay keys survive a UIDVALIDITY change."""

from __future__ import annotations

import imaplib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest

from sender.ledger.events import Feedback
from sendhost.embedded import stop_embedded
from tests.conftest import REPO_ROOT
from tests.sender import inbox_samples as samples
from tests.sender.feedback.test_inbox import _inbox, _inventory, _state, _status
from tests.sender.web_server import sent_row
from tests.support.dovecot import Dovecot, dovecot_server

# Each test reads its own two mailboxes: the server outlives the tests, and a reply is matched by its author too.
BOXES = {name: (f"{name}0@sender.example", f"{name}1@sender.example")
         for name in ("hostile", "forged", "pause", "uidvalidity", "show")}
AUTHSERV = "mx.test.example"  # the provider's id in these tests


@pytest.fixture(scope="module")
def imap() -> Iterator[Dovecot]:
    with dovecot_server({box: f"pw-{box}" for pair in BOXES.values() for box in pair}) as server:
        yield server


@pytest.fixture(autouse=True)
def _stop_the_embedded_redis(tmp_path: Path) -> Iterator[None]:
    yield
    stop_embedded(tmp_path / "state")


def _passes(result: subprocess.CompletedProcess[str]) -> dict[str, int]:
    """The pass's outcomes over both mailboxes; every mailbox read without error."""
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    total: dict[str, int] = {}
    for mailbox in json.loads(result.stdout)["mailboxes"]:
        assert mailbox["error"] is None, mailbox
        for key, n in mailbox["outcomes"].items():
            total[key] = total.get(key, 0) + n
    return total


def _feedback_rows(database_url: str) -> list[tuple[object, ...]]:
    with psycopg.connect(database_url) as conn:
        return conn.execute("SELECT email_id, event, source, verdict, ref FROM sender_feedback ORDER BY id").fetchall()


def _about_a_stranger(sample: samples.Sample) -> samples.Sample:
    return lambda _message_id, _to: sample("<not-ours@elsewhere.example>", "someone@elsewhere.example")


# The hostile messages, each (sample, what the pass counts it as). Those about a lead of ours name lead "target".
HOSTILE = [
    (_about_a_stranger(samples.charset_dsn("x-no-such-charset")), "unmatched"),  # read, and about no row of ours
    (_about_a_stranger(samples.charset_dsn("zlib_codec")), "unmatched"),
    (samples.many_ids_dsn, "unmatched"),  # our Message-ID is the 40,001st: past the cap, so about nobody
    (samples.huge_dsn, "malformed"),  # 1.3 MB: the report's parts are past the bytes read
    (samples.many_parts, "malformed"),
    (samples.deep_nesting, "malformed"),
    (samples.rfc2231_report, "unmatched"),  # names another recipient than the row's
    (samples.broken_mime, "malformed"),
    (samples.nul_ids, "unmatched"),  # NULs and ESC in the headers the ledger would be asked about
    (samples.other_recipient_bounce, "unmatched"),
    (samples.no_recipient_bounce, "deferred"),  # noted on the row, as a soft bounce: no bounce, no suppression
    (samples.bounce_of_a_stranger, "unmatched"),
    (samples.arf_not_ours, "unmatched"),  # from the lead, but naming no message of ours: no complaint
]


def test_hostile_messages_never_stop_a_pass_and_change_nothing_while_replies_are_applied(
        imap: Dovecot, feedback: Feedback, database_url: str, tmp_path: Path) -> None:
    box0, box1 = BOXES["hostile"]
    _target, target_id = sent_row(feedback, "target", "target@rcpt.example", mailbox=box0)
    real = {}
    for name, to, box in (("replier", "replier@rcpt.example", box0), ("leaver", "leaver@rcpt.example", box1),
                          ("gone", "gone@rcpt.example", box0)):
        real[name] = sent_row(feedback, name, to, mailbox=box)[1]
    feedback.ledger.enqueue(lead="replier", step=2, address="replier@rcpt.example", group="sales", subject="Again",
                            text="x", not_before=datetime.now(UTC) + timedelta(days=3))
    # The hostile ones first, in both mailboxes: the mark must move past each for the replies behind them to count.
    for n, (sample, _counted) in enumerate(HOSTILE):
        imap.append(box0 if n % 2 == 0 else box1, sample(target_id, "target@rcpt.example"))
    imap.append(box0, samples.reply(real["replier"], "replier@rcpt.example"))
    imap.append(box1, samples.unsubscribe_mail(real["leaver"], "leaver@rcpt.example"))
    # A real bounce in a charset Python cannot decode is still a bounce.
    imap.append(box0, samples.charset_dsn("x-no-such-charset")(real["gone"], "gone@rcpt.example"))
    inventory = _inventory(tmp_path, imap, boxes=(box0, box1))

    total = _passes(_inbox(inventory, database_url, tmp_path))

    expected: dict[str, int] = {}
    for _sample, counted in HOSTILE:
        expected[counted] = expected.get(counted, 0) + 1
    assert (total.get("malformed", 0), total.get("unmatched", 0), total.get("deferred", 0)) == (
        expected["malformed"], expected["unmatched"], expected["deferred"])
    # applied counts every new event on a row: the three real ones and the soft note
    assert (total["applied"], total["replied"], total["unsubscribed"], total["bounced"]) == (4, 1, 1, 1)
    assert [_status(feedback, "replier", s) for s in (1, 2)] == ["replied", "cancelled"]
    assert (_status(feedback, "leaver"), feedback.ledger.is_suppressed("leaver@rcpt.example")) == ("unsubscribed", True)
    assert (_status(feedback, "gone"), feedback.ledger.is_suppressed("gone@rcpt.example")) == ("bounced", True)
    # The hostile ones changed nothing: the target is sent and mailable, and only the soft note is on its row.
    assert (_status(feedback, "target"), feedback.ledger.is_suppressed("target@rcpt.example")) == ("sent", False)
    assert [(event, source) for email_id, event, source, _v, _r in _feedback_rows(database_url)
            if email_id == _target] == [("deferred", "inbox")]
    assert feedback.inbox_mark(box0) is not None and feedback.inbox_mark(box1) is not None

    before = _state(database_url)
    assert _passes(_inbox(inventory, database_url, tmp_path)) == {}
    assert _state(database_url) == before


def _reply_with(results: tuple[str, ...]) -> samples.Sample:
    return samples.authenticated(samples.reply, *results)


FAIL = f"{AUTHSERV}; dkim=none; spf=softfail smtp.mailfrom=rcpt.example; dmarc=fail (p=REJECT) header.from=rcpt.example"
PASS = f"{AUTHSERV}; dkim=pass header.d=rcpt.example; spf=pass smtp.mailfrom=rcpt.example; dmarc=pass " \
       "header.from=rcpt.example"


def test_forged_feedback_changes_nothing_and_a_header_under_another_id_is_ignored(
        imap: Dovecot, feedback: Feedback, database_url: str, tmp_path: Path) -> None:
    box0, box1 = BOXES["forged"]
    cases: dict[str, tuple[samples.Sample, str]] = {
        # (the message, the verdict it is recorded with)
        "forged-reply": (_reply_with((FAIL,)), "fail"),
        "forged-unsubscribe": (samples.authenticated(samples.unsubscribe_mail, FAIL), "fail"),
        # the sender wrote a pass under the provider's id, below the provider's own fail: still forged
        "forged-under-a-planted-pass": (_reply_with((FAIL, PASS)), "fail"),
        "passing": (_reply_with((PASS,)), "pass"),
        # a fail under any other id is the sender's own say-so: ignored, the reply applies (verdict none)
        "other-id": (_reply_with(("evil.example; dmarc=fail header.from=rcpt.example",)), "none"),
        # a fail about another domain than the From's says nothing of it
        "other-domain": (_reply_with((f"{AUTHSERV}; dmarc=fail header.from=elsewhere.example",)), "none"),
        "unauthenticated": (samples.reply, "none"),
    }
    rows = {}
    for n, (name, (sample, _verdict)) in enumerate(cases.items()):
        box = box0 if n % 2 == 0 else box1
        to = f"{name}@rcpt.example"
        rows[name], message_id = sent_row(feedback, name, to, mailbox=box)
        feedback.ledger.enqueue(lead=name, step=2, address=to, group="sales", subject="Again", text="x",
                                not_before=datetime.now(UTC) + timedelta(days=3))
        imap.append(box, sample(message_id, to))

    total = _passes(_inbox(_inventory(tmp_path, imap, boxes=(box0, box1), authserv_id=AUTHSERV), database_url,
                           tmp_path))

    forged = [name for name, (_s, verdict) in cases.items() if verdict == "fail"]
    assert (total["forged"], total["applied"]) == (len(forged), len(cases) - len(forged))
    for name in forged:
        assert [_status(feedback, name, s) for s in (1, 2)] == ["sent", "queued"], name
        assert not feedback.ledger.is_suppressed(f"{name}@rcpt.example")
    for name in set(cases) - set(forged):
        assert [_status(feedback, name, s) for s in (1, 2)] == ["replied", "cancelled"], name
    verdicts = {email_id: verdict for email_id, _e, _s, verdict, _r in _feedback_rows(database_url)}
    assert {name: verdicts[row] for name, row in rows.items()} == {name: v for name, (_s, v) in cases.items()}

    # `sender show` says how sure each piece of feedback was.
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "SENDHOST_STATE_DIR": str(tmp_path / "state")}
    shown = subprocess.run([sys.executable, "-c", "from toolkit.cli import main; main()", "sender", "--database-url",
                            database_url, "show", "forged-reply", "1", "--format", "json"], capture_output=True,
                           text=True, env=env, cwd=tmp_path, timeout=60, check=False)
    assert shown.returncode == 0, shown.stderr
    data = json.loads(shown.stdout)
    assert [(f["event"], f["source"], f["verdict"]) for f in data["feedback"]] == [("replied", "inbox", "fail")]
    assert "forged" in [e["kind"] for e in data["events"]]
    table = subprocess.run([sys.executable, "-c", "from toolkit.cli import main; main()", "sender", "--database-url",
                            database_url, "show", "passing", "1", "--format", "table"], capture_output=True,
                           text=True, env=env, cwd=tmp_path, timeout=60, check=False)
    assert table.returncode == 0, table.stderr
    assert "verdict" in table.stdout and "pass" in table.stdout.split("verdict", 1)[1]


def test_one_stranger_cannot_pause_a_mailbox(imap: Dovecot, feedback: Feedback, database_url: str,
                                             tmp_path: Path) -> None:
    """Three ARF reports and two DSNs about one message count as one complaint and one bounce; a DSN that names
    no recipient bounces nothing."""
    box0, box1 = BOXES["pause"]
    _row, message_id = sent_row(feedback, "victim", "victim@rcpt.example", mailbox=box0)
    _other, other_id = sent_row(feedback, "other", "other@rcpt.example", mailbox=box0)
    for n in range(3):
        imap.append(box0, samples.arf_complaint_numbered(n)(message_id, "victim@rcpt.example"))
    for n in range(2):
        imap.append(box0, samples.postfix_hard_numbered(n)(message_id, "victim@rcpt.example"))
    imap.append(box0, samples.no_recipient_bounce(other_id, "other@rcpt.example"))

    total = _passes(_inbox(_inventory(tmp_path, imap, boxes=(box0, box1)), database_url, tmp_path))

    assert (total["complained"], total["bounced"], total["deferred"]) == (3, 2, 1)  # each recorded
    assert feedback.health_since(datetime.now(UTC) - timedelta(days=7))[box0] == \
        {"sent": 2, "bounced": 1, "complained": 1}
    assert (_status(feedback, "other"), feedback.ledger.is_suppressed("other@rcpt.example")) == ("sent", False)


def _recreate(imap: Dovecot, user: str, folder: str) -> None:
    """Delete and create `folder` again: the server gives it a new UIDVALIDITY and numbers from 1 again."""
    with imaplib.IMAP4_SSL(imap.host, imap.imaps_port, ssl_context=imap.client_context(), timeout=10) as client:
        client.login(user, imap.users[user])
        client.delete(folder)
        status, detail = client.create(folder)
        assert status == "OK", detail


def test_replay_keys_survive_a_uidvalidity_change(imap: Dovecot, feedback: Feedback, database_url: str,
                                                   tmp_path: Path) -> None:
    box0, box1 = BOXES["uidvalidity"]
    folder = "Feedback"
    messages = []
    for name, sample in (("r1", samples.without_message_id(samples.reply)),
                         ("b1", samples.without_message_id(samples.postfix_hard)),
                         ("c1", samples.arf_complaint), ("d1", samples.without_message_id(samples.delayed_soft))):
        to = f"{name}@rcpt.example"
        messages.append(sample(sent_row(feedback, name, to, mailbox=box0)[1], to))
    for user in (box0, box1):
        _recreate(imap, user, folder)
    for raw in messages:
        imap.append(box0, raw, folder)
    inventory = _inventory(tmp_path, imap, boxes=(box0, box1), folder=folder)
    first = _passes(_inbox(inventory, database_url, tmp_path))
    assert first["applied"] == len(messages) and first["deferred"] == 1
    mark = feedback.inbox_mark(box0)
    recorded = _feedback_rows(database_url)
    assert any(str(ref).startswith("sha256:") for *_x, ref in recorded)

    _recreate(imap, box0, folder)  # a restore, a migration to another server: the same messages, new UIDs
    for raw in messages:
        imap.append(box0, raw, folder)
    second = _passes(_inbox(inventory, database_url, tmp_path))

    assert feedback.inbox_mark(box0) != mark
    assert second == {"replay": len(messages)}
    assert _feedback_rows(database_url) == recorded
