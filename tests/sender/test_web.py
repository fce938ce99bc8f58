"""`sendhost sender web` under uvicorn on loopback, against a real ledger: RFC 8058 one-click unsubscribe, the
confirm page in a real headless Chromium, bad tokens, relay events with an HMAC, and 1,000 concurrent clicks."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import secrets
from pathlib import Path

import httpx
import psycopg
import pytest

from sender.ledger.events import Feedback
from sender.sending.tokens import make_token
from tests.sender.web_server import WebServer, sent_row
from tests.support.cdp import chromium_page
from tests.support.chromium import chromium_or_skip

ONE_CLICK = {"content": b"List-Unsubscribe=One-Click",
             "headers": {"Content-Type": "application/x-www-form-urlencoded"}}


def _changes(database_url: str) -> tuple[int, ...]:
    """Everything a request could have written."""
    with psycopg.connect(database_url) as conn:
        row = conn.execute("SELECT (SELECT count(*) FROM sender_suppressions), (SELECT count(*) FROM sender_feedback),"
                           " (SELECT count(*) FROM sender_events), (SELECT count(*) FROM sender_emails "
                           "WHERE status <> 'sent')").fetchone()
    assert row is not None
    return tuple(int(n) for n in row)


def test_one_click_post_suppresses_and_a_resend_is_refused(web: WebServer, feedback: Feedback) -> None:
    row, _ = sent_row(feedback, "L1", "alice@rcpt.example")
    feedback.ledger.enqueue(lead="L1", step=2, to="alice@rcpt.example", group="sales", subject="Again", text="x")
    token = make_token(feedback.ledger.unsubscribe_key(), row)
    for _ in range(2):  # idempotent: a second click answers the same
        response = httpx.post(f"{web.base}/u/{token}", **ONE_CLICK)
        assert response.status_code == 200, response.text
    assert feedback.ledger.is_suppressed("alice@rcpt.example")
    shown = feedback.ledger.show("L1", 1)
    later = feedback.ledger.show("L1", 2)
    assert shown is not None and later is not None
    # the unsubscribe ends the lead's sequence (its step 2 cancelled), then suppresses the address
    assert (shown.row["status"], later.row["status"]) == ("unsubscribed", "cancelled")
    assert feedback.ledger.enqueue(lead="L9", step=1, to="Alice@rcpt.example", group="sales", subject="Hi",
                            text="x") == "suppressed"
    assert "alice@rcpt.example" not in web.log()


def test_a_get_alone_never_unsubscribes(web: WebServer, feedback: Feedback, database_url: str) -> None:
    row, _ = sent_row(feedback, "L1", "alice@rcpt.example")
    token = make_token(feedback.ledger.unsubscribe_key(), row)
    before = _changes(database_url)
    page = httpx.get(f"{web.base}/u/{token}")
    assert page.status_code == 200 and "<form method=post" in page.text and "One-Click" in page.text
    assert "alice@rcpt.example" not in page.text
    # a POST without the RFC 8058 body is not a click either
    assert httpx.post(f"{web.base}/u/{token}", content=b"x=y").status_code == 400
    assert _changes(database_url) == before
    assert not feedback.ledger.is_suppressed("alice@rcpt.example")


def test_forged_altered_and_expired_tokens_change_nothing(web: WebServer, feedback: Feedback,
                                                          database_url: str) -> None:
    row, _ = sent_row(feedback, "L1", "alice@rcpt.example")
    good = make_token(feedback.ledger.unsubscribe_key(), row)
    altered = good[:-3] + ("AAA" if good[-3:] != "AAA" else "BBB")
    other_row = make_token(feedback.ledger.unsubscribe_key(), row)[:-1]  # truncated
    forged = make_token(secrets.token_bytes(32), row)
    expired = make_token(secrets.token_bytes(32), row)  # made with a key rotated out: no longer configured
    unknown_row = make_token(feedback.ledger.unsubscribe_key(), row + 1000)
    before = _changes(database_url)
    for token in (altered, other_row, forged, expired, unknown_row, "", "%00", "x" * 500):
        for method in ("GET", "POST"):
            response = httpx.request(method, f"{web.base}/u/{token}", **ONE_CLICK)
            assert response.status_code == 404, (token, method, response.status_code)
    assert _changes(database_url) == before
    assert not feedback.ledger.is_suppressed("alice@rcpt.example")


def test_the_previous_key_still_works_while_rotating(web: WebServer, feedback: Feedback) -> None:
    row, _ = sent_row(feedback, "L1", "alice@rcpt.example")
    token = make_token(web.previous_key, row)
    assert httpx.post(f"{web.base}/u/{token}", **ONE_CLICK).status_code == 200
    assert feedback.ledger.is_suppressed("alice@rcpt.example")


def test_chromium_opens_the_page_clicks_confirm_and_the_address_is_suppressed(
        web: WebServer, feedback: Feedback, tmp_path: Path) -> None:
    binary = chromium_or_skip()
    row, _ = sent_row(feedback, "L1", "alice@rcpt.example")
    url = f"{web.base}/u/{make_token(feedback.ledger.unsubscribe_key(), row)}"
    with chromium_page(binary, tmp_path / "profile") as page:
        page.navigate(url)
        assert page.evaluate("document.getElementById('confirm').textContent") == "Unsubscribe"
        assert not feedback.ledger.is_suppressed("alice@rcpt.example")  # opening the page changed nothing
        page.evaluate("document.getElementById('confirm').click()")
        page.wait_for("document.getElementById('done') !== null")
    assert feedback.ledger.is_suppressed("alice@rcpt.example")
    shown = feedback.ledger.show("L1", 1)
    assert shown is not None and shown.row["status"] == "unsubscribed"


@pytest.mark.slow
def test_a_thousand_concurrent_clicks_leave_one_suppression(web: WebServer, feedback: Feedback,
                                                            database_url: str) -> None:
    row, _ = sent_row(feedback, "L1", "alice@rcpt.example")
    url = f"{web.base}/u/{make_token(feedback.ledger.unsubscribe_key(), row)}"

    async def click_all() -> list[object]:
        limits = httpx.Limits(max_connections=200, max_keepalive_connections=200)
        async with httpx.AsyncClient(limits=limits, timeout=120) as client:
            responses = await asyncio.gather(*(client.post(url, **ONE_CLICK) for _ in range(1000)),
                                             return_exceptions=True)
        return [r.status_code if isinstance(r, httpx.Response) else repr(r) for r in responses]

    answers = asyncio.run(click_all())
    assert answers == [200] * 1000, ({str(a) for a in answers}, web.log()[-3000:])
    with psycopg.connect(database_url) as conn:
        counts = conn.execute(
            "SELECT (SELECT count(*) FROM sender_suppressions), "
            "(SELECT count(*) FROM sender_feedback WHERE event = 'unsubscribed'), "
            "(SELECT count(*) FROM sender_events WHERE kind = 'unsubscribed')").fetchone()
    assert counts == (1, 1, 1)


def _signed(key: bytes, body: bytes) -> dict[str, str]:
    return {"X-Sendhost-Signature": "sha256=" + hmac.new(key, body, hashlib.sha256).hexdigest(),
            "Content-Type": "application/json"}


def test_events_apply_through_the_rank_guard(web: WebServer, feedback: Feedback) -> None:
    _row, message_id = sent_row(feedback, "L1", "alice@rcpt.example")
    batch = json.dumps([{"message_id": message_id, "event": "delivered", "at": "2026-11-30T10:00:00Z"},
                        {"message_id": message_id.strip("<>"), "event": "sent", "at": "2026-11-30T09:59:00Z"},
                        {"message_id": "<nobody@nowhere>", "event": "bounced", "at": "2026-11-30T10:00:00Z"}])
    body = batch.encode()
    response = httpx.post(f"{web.base}/events", content=body, headers=_signed(web.events_key, body))
    assert response.status_code == 200, response.text
    assert response.json() == {"results": ["applied", "recorded", "no_row"]}
    again = httpx.post(f"{web.base}/events", content=body, headers=_signed(web.events_key, body))
    assert again.json() == {"results": ["replay", "replay", "no_row"]}
    shown = feedback.ledger.show("L1", 1)
    assert shown is not None and shown.row["status"] == "delivered"


@pytest.mark.parametrize(("body", "signed", "status"), [
    (b'{"message_id": "<m>", "event": "bounced", "at": "2026-11-30T10:00:00Z"}', "wrong", 401),
    (b'{"message_id": "<m>", "event": "bounced", "at": "2026-11-30T10:00:00Z"}', "none", 401),
    (b"{not json", "right", 400),
    (b'{"message_id": "<m>", "event": "exploded", "at": "2026-11-30T10:00:00Z"}', "right", 400),
    (b'{"message_id": "<m>", "event": "bounced", "at": "yesterday"}', "right", 400),
    (b'{"event": "bounced", "at": "2026-11-30T10:00:00Z"}', "right", 400),
    (b'[{"message_id": "<m>", "event": "bounced", "at": "2026-11-30T10:00:00Z"}, 7]', "right", 400),
], ids=["wrong-hmac", "no-hmac", "bad-json", "unknown-event", "bad-time", "no-message-id", "half-bad-batch"])
def test_bad_events_change_nothing(web: WebServer, feedback: Feedback, database_url: str, body: bytes, signed: str,
                                   status: int) -> None:
    _row, message_id = sent_row(feedback, "L1", "alice@rcpt.example")
    body = body.replace(b"<m>", message_id.encode())
    headers = {"wrong": _signed(secrets.token_bytes(32), body), "none": {},
               "right": _signed(web.events_key, body)}[signed]
    before = _changes(database_url)
    assert httpx.post(f"{web.base}/events", content=body, headers=headers).status_code == status
    assert _changes(database_url) == before
    assert web.process.poll() is None
    metrics = httpx.get(f"{web.base}/metrics/").text
    assert "sendhost_feedback_events_total" in metrics


def test_healthz(web: WebServer) -> None:
    response = httpx.get(f"{web.base}/healthz")
    assert (response.status_code, response.text) == (200, "ok\n")


@pytest.mark.parametrize(("args", "words"), [
    (["web", "--listen", "nonsense"], "HOST:PORT"),
    (["web", "--events-key-file", "/nonexistent/events.key"], "--events-key-file"),
    (["web", "--previous-key-file", "/nonexistent/old.key"], "--previous-key-file"),
])
def test_bad_options_exit_2_naming_the_fix(database_url: str, feedback: Feedback, tmp_path: Path, args: list[str],
                                          words: str) -> None:
    import os
    import subprocess
    import sys

    from tests.conftest import REPO_ROOT

    result = subprocess.run([sys.executable, "-c", "from toolkit.cli import main; main()", "sender",
                             "--database-url", database_url, *args], capture_output=True, text=True, timeout=60,
                            cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO_ROOT),
                                               "SENDHOST_STATE_DIR": str(tmp_path / "state")})
    assert result.returncode == 2, result.stderr
    assert words in result.stderr and "Traceback" not in result.stderr


def test_an_oversized_events_body_is_refused_before_it_is_read(web: WebServer, feedback: Feedback,
                                                               database_url: str) -> None:
    body = b"[" + b" " * (2 << 20) + b"]"
    before = _changes(database_url)
    response = httpx.post(f"{web.base}/events", content=body, headers=_signed(web.events_key, body))
    assert response.status_code == 413
    assert _changes(database_url) == before and web.process.poll() is None
